// Package examples_test checks the repository's examples without a cluster: every document of
// examples/kubernetes/*.yaml decodes strictly (unknown fields refused) into the Kubernetes API
// types, and what docs/operator-guide.md relies on holds. It is a package of its own so that
// the large k8s.io modules compile only here.
package examples_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/resplane/resplane/adapters/config"
	"github.com/resplane/resplane/adapters/prometheus"
	"github.com/resplane/resplane/domain/hostpolicy"
)

// separator splits a YAML stream into its documents.
var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// objects is what one example file declares, decoded.
type objects struct {
	configMaps  map[string]corev1.ConfigMap
	deployments []appsv1.Deployment
	services    []corev1.Service
}

// decodeStrictly decodes every document of path into its Kubernetes type, refusing unknown
// fields, duplicate keys and kinds the examples are not meant to hold.
func decodeStrictly(t *testing.T, path string) objects {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	o := objects{configMaps: map[string]corev1.ConfigMap{}}
	for i, doc := range separator.Split(string(raw), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var target any
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 ConfigMap":
			target = &corev1.ConfigMap{}
		case "apps/v1 Deployment":
			target = &appsv1.Deployment{}
		case "v1 Service":
			target = &corev1.Service{}
		default:
			t.Fatalf("document %d is a %s %s, which this test does not know", i, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("document %d (%s) does not decode strictly: %v", i, meta.Kind, err)
		}
		switch v := target.(type) {
		case *corev1.ConfigMap:
			o.configMaps[v.Name] = *v
		case *appsv1.Deployment:
			o.deployments = append(o.deployments, *v)
		case *corev1.Service:
			o.services = append(o.services, *v)
		}
	}
	return o
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// flagsOf reads a serve command line written as --flag=value words.
func flagsOf(t *testing.T, args []string) map[string]string {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("resplane runs %q, want serve", args)
	}
	flags := map[string]string{}
	for _, a := range args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			t.Fatalf("argument %q is not --flag=value", a)
		}
		flags[name] = value
	}
	return flags
}

// portNumber resolves a probe's or a service's port (a number, or a container port's name).
func portNumber(c corev1.Container, port string) int {
	if n, err := strconv.Atoi(port); err == nil {
		return n
	}
	for _, p := range c.Ports {
		if p.Name == port {
			return int(p.ContainerPort)
		}
	}
	return 0
}

func portOf(t *testing.T, hostPort string) int {
	t.Helper()
	n, err := strconv.Atoi(hostPort[strings.LastIndexByte(hostPort, ':')+1:])
	if err != nil {
		t.Fatalf("%q has no port", hostPort)
	}
	return n
}

func repoRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..")
}

// TestEveryKubernetesExampleDecodesAndHoldsWhatTheDocsRelyOn pins examples/kubernetes/ against
// docs/operator-guide.md ("Running as a sidecar", "TLS"): each document is a valid Kubernetes
// object; resplane's container runs serve with a manifest its ConfigMap holds (and that
// resplane accepts); its probes reach paths the metrics listener serves on the
// --metrics-listen port; its resource port is --listen's, and the Service targets it; the
// volume its TLS pair comes from is mounted read-only; and it runs as non-root with every
// capability dropped and no privilege escalation.
func TestEveryKubernetesExampleDecodesAndHoldsWhatTheDocsRelyOn(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(repoRoot(), "examples", "kubernetes", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example: %v", err)
	}
	sawTLS := false
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			o := decodeStrictly(t, path)
			if len(o.deployments) == 0 {
				t.Fatal("the example deploys nothing")
			}
			for _, d := range o.deployments {
				sawTLS = checkDeployment(t, d, o) || sawTLS
			}
		})
	}
	if !sawTLS {
		t.Error("no example serves TLS")
	}
}

// checkDeployment checks one Deployment's resplane container; it reports whether it serves TLS.
func checkDeployment(t *testing.T, d appsv1.Deployment, o objects) bool {
	t.Helper()
	pod := d.Spec.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == "resplane" })
	if i < 0 {
		t.Fatalf("deployment %s has no resplane container", d.Name)
	}
	c := pod.Containers[i]
	flags := flagsOf(t, c.Args)
	mountOf := func(path string) (corev1.VolumeMount, bool) {
		var best corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if (path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")) && len(m.MountPath) > len(best.MountPath) {
				best = m
			}
		}
		return best, best.Name != ""
	}
	volumeOf := func(name string) corev1.Volume {
		for _, v := range pod.Volumes {
			if v.Name == name {
				return v
			}
		}
		t.Fatalf("no volume %q", name)
		return corev1.Volume{}
	}

	t.Run("the manifest is in a ConfigMap and resplane accepts it", func(t *testing.T) {
		m, ok := mountOf(flags["manifest"])
		cmRef := volumeOf(m.Name).ConfigMap
		if !ok || cmRef == nil {
			t.Fatalf("--manifest %s is not on a ConfigMap volume", flags["manifest"])
		}
		cm, ok := o.configMaps[cmRef.Name]
		text := cm.Data[filepath.Base(flags["manifest"])]
		if !ok || text == "" {
			t.Fatalf("the ConfigMap %s holds no %s", cmRef.Name, filepath.Base(flags["manifest"]))
		}
		file := filepath.Join(t.TempDir(), "murmur.yaml")
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, d := config.LoadManifest(file); d != nil {
			t.Fatalf("resplane refuses the example's manifest:\n%s", d.Render())
		}
	})

	t.Run("the probes reach the metrics listener", func(t *testing.T) {
		handler := prometheus.New().Handler(func() bool { return true }, hostpolicy.New(strings.Split(flags["allowed-hosts"], ",")...), nil)
		for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if probe == nil || probe.HTTPGet == nil {
				t.Fatalf("no %s httpGet probe", name)
			}
			if got, want := portNumber(c, probe.HTTPGet.Port.String()), portOf(t, flags["metrics-listen"]); got != want {
				t.Errorf("the %s probe's port is %d, want the --metrics-listen port %d", name, got, want)
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, probe.HTTPGet.Path, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("the %s probe's path %s answers %d on the metrics listener", name, probe.HTTPGet.Path, rec.Code)
			}
		}
		// Prometheus's pod discovery scrapes the annotated path by the pod's address.
		scrape := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		scrape.Host = "10.1.2.3:" + strconv.Itoa(portOf(t, flags["metrics-listen"]))
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, scrape)
		if rec.Code != http.StatusOK {
			t.Errorf("a scrape by the pod's address answers %d on the metrics listener", rec.Code)
		}
	})

	t.Run("the resource port is --listen's, and the Service targets it", func(t *testing.T) {
		if got, want := portNumber(c, "resources"), portOf(t, flags["listen"]); got != want || got == 0 {
			t.Fatalf("the resources port is %d, want --listen's %d", got, want)
		}
		for _, s := range o.services {
			for _, p := range s.Spec.Ports {
				if portNumber(c, p.TargetPort.String()) == 0 {
					t.Errorf("service %s targets %s, which the container does not declare", s.Name, p.TargetPort.String())
				}
			}
		}
	})

	t.Run("resplane runs as non-root with every capability dropped", func(t *testing.T) {
		s, podSec := c.SecurityContext, pod.SecurityContext
		nonRoot := s != nil && s.RunAsNonRoot != nil && *s.RunAsNonRoot ||
			podSec != nil && podSec.RunAsNonRoot != nil && *podSec.RunAsNonRoot
		for _, uid := range []*int64{s.RunAsUser, podSec.RunAsUser} {
			if uid != nil && *uid == 0 {
				nonRoot = false
			}
		}
		if !nonRoot {
			t.Error("resplane may run as root")
		}
		if s == nil || s.Capabilities == nil || !slices.Contains(s.Capabilities.Drop, "ALL") || len(s.Capabilities.Add) != 0 {
			t.Errorf("resplane's capabilities %+v: want drop ALL and nothing added", s.Capabilities)
		}
		if s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
			t.Error("resplane may escalate its privileges")
		}
		if s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem {
			t.Error("resplane's root filesystem is writable")
		}
	})

	if flags["tls-cert"] == "" {
		return false
	}
	t.Run("the TLS pair comes from a volume mounted read-only", func(t *testing.T) {
		for _, flag := range []string{"tls-cert", "tls-key"} {
			m, ok := mountOf(flags[flag])
			if !ok || !m.ReadOnly {
				t.Fatalf("--%s %s is not on a read-only mount (%+v)", flag, flags[flag], m)
			}
			if v := volumeOf(m.Name); v.Secret == nil && v.Projected == nil && v.CSI == nil && v.EmptyDir == nil {
				t.Fatalf("--%s comes from volume %s, which is none of a secret, a projected or CSI volume, or a sidecar's emptyDir", flag, m.Name)
			}
		}
		if !strings.HasPrefix(flags["advertise-url"], "https://") {
			t.Errorf("--advertise-url %s under TLS, want https://", flags["advertise-url"])
		}
	})
	return true
}
