// Package operator holds the use cases of the operator's client: `resplane files` and the
// resources of `resplane mcp`, which talk to a running service from outside it
// (docs/operator-guide.md, "Pulling outputs"). RemoteFiles lists one service's export and
// fetches single files, verified against their etags, onto a ports.Landing; Mirror is
// `resplane files pull`, which plans, compares, fetches in parallel, deletes and sums up.
//
// The service is not trusted: a listed path is lowered with the service's own rules
// (domain/pathpolicy) before it reaches the local directory, a body is landed only when it
// matches its etag, and a refusal the service sends keeps its code only when that code is
// plausible (refusal.Foreign) and its message only in printable form.
//
// The use cases reach the outside world only through the operator's ports (ports.RemoteExport,
// ports.LocalMirror, ports.Progress and ports.Landing, in ports/operator_*.go and
// ports/landing.go), so every rule is tested against a service in memory and a real directory.
// Nothing here imports the service's use cases (package application): the two sides share
// only the domain and ports.
package operator
