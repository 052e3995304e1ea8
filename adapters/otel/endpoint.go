package otel

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// The standard variables that name the collector, in the order they are consulted after the
// flag.
const (
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
)

// tracesPath is where spans go beneath a base URL.
const tracesPath = "/v1/traces"

// Endpoint resolves where spans are posted: the --otel-endpoint flag, else
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT; "" when none is set,
// which turns spans off. The flag and OTEL_EXPORTER_OTLP_ENDPOINT are base URLs, to which
// /v1/traces is appended; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is — the OTLP
// exporter specification's rules. A value that is not an http:// or https:// URL with a host,
// or that carries credentials (user:password@), is an error naming its source. An empty
// variable counts as unset.
func Endpoint(flag string, getenv func(string) string) (string, error) {
	for _, source := range []struct {
		name, value string
		base        bool
	}{
		{"--otel-endpoint", flag, true},
		{EnvTracesEndpoint, getenv(EnvTracesEndpoint), false},
		{EnvEndpoint, getenv(EnvEndpoint), true},
	} {
		value := strings.TrimSpace(source.value)
		if value == "" {
			continue
		}
		u, err := url.Parse(value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("%s %q must be an http:// or https:// URL with a host, such as http://127.0.0.1:4318", source.name, value)
		}
		if u.User != nil {
			return "", fmt.Errorf("%s must not carry credentials in the URL; give them in OTEL_EXPORTER_OTLP_HEADERS", source.name)
		}
		if source.base {
			u.Path = path.Join("/", u.Path, tracesPath)
		}
		return u.String(), nil
	}
	return "", nil
}
