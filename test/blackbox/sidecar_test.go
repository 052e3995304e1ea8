package blackbox_test

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/resplane/resplane/test/harness"
)

// bbRepoFile reads a file of the repository by its path from the module root.
func bbRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// bbPod is the part of a Kubernetes Deployment the sidecar example is checked on.
type bbPod struct {
	Kind string `yaml:"kind"`
	Data map[string]string
	Spec struct {
		Template struct {
			Spec struct {
				SecurityContext bbSecurity    `yaml:"securityContext"`
				Volumes         []bbVolume    `yaml:"volumes"`
				Containers      []bbContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type bbVolume struct {
	Name     string    `yaml:"name"`
	EmptyDir *struct{} `yaml:"emptyDir"`
}

type bbSecurity struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	RunAsUser                *int  `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

type bbProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type bbContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe  bbProbe    `yaml:"livenessProbe"`
	ReadinessProbe bbProbe    `yaml:"readinessProbe"`
	Security       bbSecurity `yaml:"securityContext"`
	Mounts         []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// TestTheSidecarExampleIsLockedDownAndRunsAsWritten pins docs/operator-guide.md ("Running as
// a sidecar") on examples/kubernetes/sidecar.yaml: the agent and resplane share an emptyDir
// workdir; resplane declares its resource port, is probed on /healthz and /readyz on its
// metrics port, runs as non-root with a read-only root filesystem, no privilege escalation and
// every capability dropped; and its arguments, with the mount points moved to temporary
// directories and the ports to free ones, start the real binary, which then answers the
// probes and serves the export.
func TestTheSidecarExampleIsLockedDownAndRunsAsWritten(t *testing.T) {
	var deployment bbPod
	var manifest string
	dec := yaml.NewDecoder(bytes.NewReader(bbRepoFile(t, "examples/kubernetes/sidecar.yaml")))
	for {
		var doc bbPod
		if err := dec.Decode(&doc); err != nil {
			break
		}
		switch doc.Kind {
		case "Deployment":
			deployment = doc
		case "ConfigMap":
			manifest = doc.Data["murmur.yaml"]
		}
	}
	pod := deployment.Spec.Template.Spec
	if len(pod.Containers) != 2 || manifest == "" {
		t.Fatalf("want a ConfigMap with murmur.yaml and a Deployment of two containers, got %d containers", len(pod.Containers))
	}
	agent, sidecar := pod.Containers[0], pod.Containers[1]
	if sidecar.Name != "resplane" || sidecar.Args[0] != "serve" {
		t.Fatalf("the second container is %q running %q, want resplane serve", sidecar.Name, sidecar.Args)
	}
	mountOf := func(c bbContainer, volume string) string {
		for _, m := range c.Mounts {
			if m.Name == volume {
				return m.MountPath
			}
		}
		return ""
	}
	if !slices.ContainsFunc(pod.Volumes, func(v bbVolume) bool { return v.Name == "workdir" && v.EmptyDir != nil }) || mountOf(agent, "workdir") == "" || mountOf(agent, "workdir") != mountOf(sidecar, "workdir") {
		t.Errorf("the workdir is not one emptyDir mounted at the same path in both containers")
	}
	if !slices.Contains(sidecar.Args, "--workdir="+mountOf(sidecar, "workdir")) {
		t.Errorf("resplane's --workdir is not the shared volume: %q", sidecar.Args)
	}
	s := sidecar.Security
	if s.RunAsNonRoot == nil || !*s.RunAsNonRoot || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem ||
		s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation || !slices.Equal(s.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("resplane's securityContext %+v: want runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, drop ALL", s)
	}
	if u := pod.SecurityContext.RunAsUser; u == nil || *u == 0 {
		t.Errorf("the pod runs as user %v, want a non-root uid", u)
	}
	ports := map[string]int{}
	for _, p := range sidecar.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["resources"] == 0 || ports["metrics"] == 0 {
		t.Errorf("ports %v: want the resource port and the metrics port declared", ports)
	}
	for probe, want := range map[*bbProbe]string{&sidecar.LivenessProbe: "/healthz", &sidecar.ReadinessProbe: "/readyz"} {
		if probe.HTTPGet.Path != want || probe.HTTPGet.Port != "metrics" {
			t.Errorf("probe %+v, want GET %s on the metrics port", probe.HTTPGet, want)
		}
	}

	// Run it: every mount point becomes a temporary directory, every listener a free port.
	root := t.TempDir()
	var args []string
	for _, arg := range sidecar.Args[1:] {
		for _, m := range sidecar.Mounts {
			arg = strings.ReplaceAll(arg, "="+m.MountPath, "="+filepath.Join(root, m.Name))
		}
		arg = regexp.MustCompile(`^(--(metrics-)?listen)=0\.0\.0\.0:\d+$`).ReplaceAllString(arg, "$1=127.0.0.1:0")
		args = append(args, arg)
	}
	for _, m := range sidecar.Mounts {
		if err := os.MkdirAll(filepath.Join(root, m.Name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "capsule", "murmur.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "workdir", "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "workdir", "out", "report.md"), []byte("# report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, nil, args...)
	if p.Ready.Metrics == nil {
		t.Fatalf("started with %q, the ready line has no metrics address", args)
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		r := harness.Raw(t, *p.Ready.Metrics, "GET "+path+" HTTP/1.0\r\nHost: "+*p.Ready.Metrics+"\r\n\r\n")
		if r.Status != http.StatusOK || string(r.Body) != want {
			t.Errorf("%s answered %d %q", path, r.Status, r.Body)
		}
	}
	if r := harness.Get(t, p.Ready.Listen, "/resources/files/report.md"); r.Status != http.StatusOK || string(r.Body) != "# report\n" {
		t.Errorf("the export answered %d %q", r.Status, r.Body)
	}
	if _, err := os.Stat(filepath.Join(root, "control", "control.sock")); err != nil {
		t.Errorf("the control socket is not on the volume the agent mounts: %v", err)
	}
	if _, port, _ := net.SplitHostPort(p.Ready.Listen); port == "0" {
		t.Errorf("listening on %s", p.Ready.Listen)
	}
}

// TestTheContainerfileBuildsAStaticNonRootImageWithoutAShell pins docs/operator-guide.md
// ("Running as a sidecar") on the Containerfile: the binary is built with CGO_ENABLED=0, the
// image it lands in is distroless static (or scratch), which holds no shell, nothing runs in
// that stage, and it runs as a numeric non-root user.
func TestTheContainerfileBuildsAStaticNonRootImageWithoutAShell(t *testing.T) {
	var stages [][]string
	for _, line := range strings.Split(string(bbRepoFile(t, "Containerfile")), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], line)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("want a build stage and an image stage, got %d stages", len(stages))
	}
	build, image := strings.Join(stages[len(stages)-2], "\n"), stages[len(stages)-1]
	if !strings.Contains(build, "CGO_ENABLED=0 go build") {
		t.Errorf("the build stage does not build with CGO_ENABLED=0:\n%s", build)
	}
	base := strings.Fields(image[0])[1]
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("the image is based on %s, want distroless static or scratch (no shell)", base)
	}
	var user string
	for _, line := range image[1:] {
		switch word := strings.Fields(line)[0]; word {
		case "RUN":
			t.Errorf("the image stage runs a command (it has no shell to run it): %s", line)
		case "USER":
			user = strings.Fields(line)[1]
		case "ENTRYPOINT":
			if !strings.HasPrefix(strings.TrimPrefix(line, "ENTRYPOINT "), "[") {
				t.Errorf("ENTRYPOINT is in shell form: %s", line)
			}
		}
	}
	if !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(user) {
		t.Errorf("USER %q, want a numeric non-root uid:gid", user)
	}
}
