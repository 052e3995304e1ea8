// Package httpapi is the resource listener's HTTP edge, built on echo: it routes on the raw
// request target (docs/http-api.md, "Routing"), renders the application's answers and refusals
// as headers and JSON, and maps every refusal code to its status in one table (status.go).
//
// Routing never looks at a decoded or cleaned path: the target is taken exactly as the client
// sent it (see adapters/httpapi/rawtarget), the query is cut at the first "?", and the rest
// is matched by whole segments.
package httpapi
