package main

import (
	"context"
	"path/filepath"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/config"
)

func serveCommand() *command {
	return &command{spec: config.Serve.Spec(), load: (*program).serve}
}

// serve runs the service: the settings become a Launch (resplane.OpenLaunch, which binds the
// listeners), wire assembles the service over it, and the service runs until a signal. Each
// step releases what it took, in reverse order.
func (p *program) serve(ctx context.Context, args []string) error {
	settings, err := config.Load(config.Serve, args, p.getenv)
	if err != nil {
		return err
	}
	launch, err := resplane.OpenLaunch(settings, p.getenv, p.stderr)
	if err != nil {
		return err
	}
	defer launch.Close()
	svc, cleanup, err := resplane.InitializeService(launch)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := svc.Run(ctx, p.stdout); err != nil {
		launch.Log.Error().Err(err).Msg("the service stopped")
		return exitError(exitFailure)
	}
	return nil
}

func checkCommand() *command {
	return &command{spec: config.Check.Spec(), load: (*program).check}
}

// check runs the launch checks serve would run and prints the effective grants; it creates
// nothing.
func (p *program) check(_ context.Context, args []string) error {
	settings, err := config.Load(config.Check, args, p.getenv)
	if err != nil {
		return err
	}
	// Without --workdir there is no session yet, so no default workdir can exist: the
	// E-CAP-007 check then has nothing to inspect, exactly as on a first serve.
	workdir := ""
	if settings.Workdir != "" {
		if workdir, err = filepath.Abs(settings.Workdir); err != nil {
			return err
		}
	}
	line, err := resplane.Check(settings.Manifest, settings.AfterTask, workdir, p.stderr)
	if err != nil {
		return err
	}
	_, err = p.stdout.Write(line)
	return err
}
