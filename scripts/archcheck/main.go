// Command archcheck enforces the dependency rule of docs/architecture.md: it lists every
// package of the module with its direct imports and fails when one points the wrong way.
//
//	domain/...      stdlib and domain only
//	ports           stdlib, domain and ports
//	application     stdlib, domain and ports; application/operator (the operator's client)
//	                and the rest of application do not import each other
//	adapters/<a>/.. stdlib, domain, ports, application, its own subpackages, adapters/internal/...,
//	                libraries; never another adapter
//	adapters/internal/<x>
//	                what adapters share (the EINTR retry, the outbound HTTP client): stdlib,
//	                golang.org/x/... and domain only
//	cmd/...         the root package, adapters/config (what it was told), domain, ports,
//	                application and libraries; every other adapter only through the root
//	root            the composition root; nothing but cmd/... may import it
//
// It is run by `make arch` and by `make test`.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

const module = "github.com/resplane/resplane"

func main() {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "archcheck: go list failed:", err)
		os.Exit(1)
	}
	var violations []string
	scanner := bufio.NewScanner(bytes.NewReader(out))
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		for _, imp := range fields[1:] {
			if reason := violation(pkg, imp); reason != "" {
				violations = append(violations, fmt.Sprintf("%s imports %s: %s", pkg, imp, reason))
			}
		}
	}
	if len(violations) > 0 {
		fmt.Fprintln(os.Stderr, "archcheck: the dependency rule is broken:")
		for _, v := range violations {
			fmt.Fprintln(os.Stderr, "  "+v)
		}
		os.Exit(1)
	}
	fmt.Println("archcheck: dependency rule holds")
}

// layer names the top-level folder a package of this module lives in ("" for the root).
func layer(pkg string) string {
	top, _, _ := strings.Cut(pkg, "/")
	return top
}

func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// violation explains why pkg may not import imp, or returns "".
func violation(pkg, imp string) string {
	if isStdlib(imp) {
		return ""
	}
	own := imp == module || strings.HasPrefix(imp, module+"/")
	target := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
	if imp == module && layer(pkg) != "cmd" {
		return "only cmd/ may import the composition root"
	}
	switch layer(pkg) {
	case "cmd":
		if own && layer(target) == "adapters" && target != "adapters/config" {
			return "cmd reaches adapters other than adapters/config only through the composition root"
		}
	case "domain":
		if !own || layer(target) != "domain" {
			return "domain may import only the standard library and domain"
		}
	case "ports":
		if !own || (layer(target) != "domain" && layer(target) != "ports") {
			return "ports may import only the standard library, domain and ports"
		}
	case "application":
		if !own || !oneOf(layer(target), "domain", "ports", "application") {
			return "application may import only the standard library, domain and ports"
		}
		if layer(target) == "application" && operatorSide(pkg) != operatorSide(target) {
			return "the service's use cases (application) and the operator's client (application/operator) do not import each other"
		}
	case "adapters":
		if shared(pkg) {
			if (own && layer(target) != "domain") || (!own && !strings.HasPrefix(imp, "golang.org/x/")) {
				return "a package under adapters/internal may import only the standard library, golang.org/x/... and domain"
			}
			return ""
		}
		if own && layer(target) == "adapters" && !shared(target) && adapterOf(target) != adapterOf(pkg) {
			return "an adapter may not import another adapter"
		}
		if own && !oneOf(layer(target), "domain", "ports", "application", "adapters") {
			return "an adapter may import only domain, ports, application and libraries"
		}
	}
	return ""
}

// operatorSide reports whether pkg holds the operator's client's use cases.
func operatorSide(pkg string) bool {
	return pkg == "application/operator" || strings.HasPrefix(pkg, "application/operator/")
}

// shared reports whether pkg is one of the packages under adapters/internal/, which any adapter
// may import: they hold what adapters share without importing one another.
func shared(pkg string) bool { return strings.HasPrefix(pkg, "adapters/internal/") }

// adapterOf returns "adapters/<name>" for a package under adapters/.
func adapterOf(pkg string) string {
	parts := strings.SplitN(pkg, "/", 3)
	if len(parts) < 2 {
		return pkg
	}
	return parts[0] + "/" + parts[1]
}

func oneOf(s string, options ...string) bool { return slices.Contains(options, s) }
