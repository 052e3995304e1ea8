package resplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/adapters/fanout"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/trace"
)

// Service is one running capsule session: the resource listener, the control socket, the
// metrics listener when it is on, and the trace. Run serves until its context ends, then shuts
// down gracefully.
type Service struct {
	launch         Launch
	workdirCreated bool
	resource       *http.Server
	resourceLn     net.Listener
	control        *http.Server
	ctlLn          net.Listener
	requests       *limits.Inflight
	trace          *fanout.Sink
	session        application.Session
	tools          []string
	log            zerolog.Logger
	confined       landlock.Result
	metrics        metricsServer
	ready          *readiness
	listingCache   string // application.Files.ListingCache
}

// ReadyLine is the one JSON object serve prints on stdout once both listeners are up.
type ReadyLine struct {
	Event       string   `json:"event"`
	SessionID   string   `json:"session_id"`
	Listen      string   `json:"listen"`
	URL         string   `json:"url"`
	Audience    string   `json:"audience"`
	Control     string   `json:"control"`
	Trace       string   `json:"trace"`
	Workdir     string   `json:"workdir"`
	Containment string   `json:"containment"`
	Confinement string   `json:"confinement"`
	Planes      []string `json:"planes"`
	Tools       []string `json:"tools"`
	// Metrics is the metrics listener's bound address, null when --metrics-listen is not given.
	Metrics *string `json:"metrics"`
	// PeerProof is "bound", "required" or "none" (proof.State).
	PeerProof string `json:"peer_proof"`
	// TLS is whether the resource listener serves TLS.
	TLS bool `json:"tls"`
	// ListingCache is the listing hash cache's mode: "lease" or "max-age".
	ListingCache string `json:"listing_cache"`
}

// Run writes session_start (unless joining a session), serves the listeners, prints the ready
// line to stdout and blocks until ctx ends (a signal) or a listener fails. On ctx's end it
// stops answering ready on /readyz and accepting on the resource listener and the control
// socket, gives in-flight requests up to the shutdown grace to finish, cancels and briefly
// waits for those that did not, appends session_end, and closes the metrics listener last.
// The returned error is nil after a graceful shutdown.
func (s *Service) Run(ctx context.Context, stdout io.Writer) error {
	l := s.launch
	planes := l.Manifest.Planes()
	s.trace.Start(trace.SessionStart{
		Capsule: l.Manifest.Name, Version: l.Manifest.Version, Containment: l.Containment.String(),
		Planes: planes, Tools: s.tools, Workdir: l.Paths.Workdir,
	})
	failed := make(chan error, 3)
	go serve(s.resource, s.resourceLn, failed)
	go serve(s.control, s.ctlLn, failed)
	var metricsAddr *string
	if s.metrics.srv != nil {
		go serve(s.metrics.srv, s.metrics.ln, failed)
		addr := s.metrics.ln.Addr().String()
		metricsAddr = &addr
	}

	// /readyz says ready from the moment the ready line can be read.
	s.ready.Store(true)
	ready, err := json.Marshal(ReadyLine{
		Event: "ready", SessionID: l.Identity.SessionID, Listen: l.Listener.Addr().String(), URL: l.Network.AdvertiseURL,
		Audience: l.Network.Audience, Control: l.Paths.ControlPath, Trace: l.Paths.TracePath, Workdir: l.Paths.Workdir,
		Containment: l.Containment.String(), Confinement: s.confined.String(), Planes: planes, Tools: s.tools,
		Metrics: metricsAddr, PeerProof: proof.State(l.Network.PeerProof, l.Manifest.DeclaresPeerPlane()),
		TLS: l.Network.TLS != nil, ListingCache: s.listingCache,
	})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", ready); err != nil {
		return fmt.Errorf("writing the ready line: %w", err)
	}
	s.log.Info().Str("listen", l.Listener.Addr().String()).Str("session_id", l.Identity.SessionID).Msg("serving")
	s.describeWorkdir()

	select {
	case err := <-failed:
		return fmt.Errorf("a listener stopped: %w", err)
	case <-ctx.Done():
	}
	s.ready.Store(false)
	s.log.Info().Msg("shutting down")
	s.requests.Drain()
	grace, cancel := context.WithTimeout(context.Background(), l.Limits.ShutdownGrace)
	defer cancel()
	if err := errors.Join(s.resource.Shutdown(grace), s.control.Shutdown(grace)); err != nil {
		s.log.Warn().Err(err).Msg("in-flight requests did not finish within the shutdown grace; cancelling them")
	}
	if !s.requests.Abandon(abandonWait) {
		s.log.Warn().Msg("cancelled requests did not return in time")
	}
	s.trace.End(trace.SessionEnd{Generation: s.session.Generation.Current(), Reason: "signal"})
	if s.metrics.srv != nil {
		// Last, so that a scrape during the shutdown still answers (and /readyz says 503).
		scrapes, cancel := context.WithTimeout(context.Background(), abandonWait)
		defer cancel()
		if err := s.metrics.srv.Shutdown(scrapes); err != nil {
			s.log.Warn().Err(err).Msg("the metrics listener did not close within the shutdown grace")
		}
	}
	return nil
}

// abandonWait bounds how long shutdown waits, after the grace, for cancelled requests to
// return (a cancelled fetch removes its temp file; a cancelled read releases its buffer).
const abandonWait = 2 * time.Second

func serve(srv *http.Server, ln net.Listener, failed chan<- error) {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		failed <- err
	}
}

// describeWorkdir says, once the service serves, what a newcomer would otherwise have to guess
// from an empty listing: that the launch created the workdir, and which declared export root
// does not exist in it yet.
func (s *Service) describeWorkdir() {
	l := s.launch
	if s.workdirCreated {
		l.Log.Info().Str("workdir", l.Paths.Workdir).Msg("created the workdir: it did not exist")
	}
	for field, root := range l.Manifest.Roots() {
		if _, err := os.Lstat(filepath.Join(l.Paths.Workdir, root)); errors.Is(err, os.ErrNotExist) {
			l.Log.Info().Str("field", field).Str("root", root).
				Msg("this export root does not exist yet in the workdir: it lists no file until it is created")
		}
	}
}
