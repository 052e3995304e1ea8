package control

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/refusal"
)

// The tool names, as the agent's model sees them.
const (
	ShareFileTool     = "share-file"
	FetchPeerFileTool = "fetch-peer-file"
)

// toolSpec is one entry of GET /v1/tools.
type toolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

var shareFileSpec = toolSpec{
	Name: ShareFileTool,
	Description: "Mint a handle that lets one named peer capsule read one file under exports.peer_files.root. " +
		"Send the returned handle to that peer in a message; it expires after ttl (at most max_ttl).",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The file to share, relative to exports.peer_files.root, such as report.md or results/table.csv. Only regular files under that root can be shared."},"peer":{"type":"string","description":"The peer capsule's address: host:port (localhost:41234) or an http(s) URL. It must be in capabilities.network.allow."},"ttl":{"type":"string","description":"How long the handle stays valid: seconds (90) or a number suffixed s, m, h or d (90s, 15m, 2h). At most max_ttl: a longer one is shortened to it. Absent means max_ttl."}},"required":["path","peer"]}`),
}

var fetchPeerFileSpec = toolSpec{
	Name: FetchPeerFileTool,
	Description: "Redeem a handle a peer capsule sent you: the file is verified and stored in your workdir " +
		"as peer-in/<handle id>-<file name> (fetching the same handle again replaces it), " +
		"and the result's path names it (relative to your workdir). Read that file to use its contents.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"peer":{"type":"string","description":"The address of the peer capsule that sent the handle: host:port (localhost:41234) or an http(s) URL. It must be in capabilities.peer_fetch.allow."},"handle":{"type":"string","description":"The handle the peer sent, exactly as received (it starts with mh1.)."}},"required":["peer","handle"]}`),
}

// offered returns the specs of the tools this API offers: those whose use case exists, which
// is exactly those whose grant is declared.
func (a *API) offered() []toolSpec {
	specs := []toolSpec{}
	if a.share != nil {
		specs = append(specs, shareFileSpec)
	}
	if a.fetch != nil {
		specs = append(specs, fetchPeerFileSpec)
	}
	return specs
}

// Tools returns the names of the tools this API offers, in a stable order.
func (a *API) Tools() []string {
	names := []string{}
	for _, spec := range a.offered() {
		names = append(names, spec.Name)
	}
	return names
}

func (a *API) listTools(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string][]toolSpec{"tools": a.offered()})
}

// toolAnswer is a tool's 200 answer.
type toolAnswer struct {
	Data    any    `json:"data"`
	Summary string `json:"summary"`
}

func (a *API) callTool(c echo.Context) error {
	switch name := c.Param("name"); {
	case name == ShareFileTool && a.share != nil:
		return a.callShare(c)
	case name == FetchPeerFileTool && a.fetch != nil:
		return a.callFetch(c)
	default:
		return a.refuse(c, refusal.WithMessage(refusal.UnknownTool, "No tool of that name is offered to this capsule; see GET /v1/tools."))
	}
}

// stringField reads an optional string field; a field of another JSON type (null included)
// reads as absent and reports !ok so required fields can be refused.
func stringField(object map[string]json.RawMessage, key string) (value string, ok bool) {
	raw, present := object[key]
	if !present || string(raw) == "null" {
		return "", false
	}
	return value, json.Unmarshal(raw, &value) == nil
}

func (a *API) callShare(c echo.Context) error {
	object, err := readObject(c)
	if err != nil {
		return a.refuse(c, err)
	}
	path, okPath := stringField(object, "path")
	peer, okPeer := stringField(object, "peer")
	if !okPath || !okPeer {
		return a.refuse(c, refusal.WithMessage(refusal.InvalidInput, `"path" and "peer" are required non-empty strings.`))
	}
	ttl, hasTTL := stringField(object, "ttl") // a ttl that is not a string is ignored
	result, err := a.share.Share(c.Request().Context(), application.ShareInput{Path: path, Peer: peer, TTL: ttl, HasTTL: hasTTL})
	if err != nil {
		return a.refuse(c, err)
	}
	// How an operator tells a bound handle (docs/peer-plane.md, "Proof of possession").
	a.log.Info().Str("handle_id", result.HandleID).Str("audience", result.Audience).Bool("bound", result.Bound).
		Msg("share-file minted a handle")
	return c.JSON(http.StatusOK, toolAnswer{Data: shareData{
		Handle: result.Handle, HandleID: result.HandleID, ExpiresAtMs: result.ExpiresAtMs, Audience: result.Audience,
	}, Summary: result.Summary()})
}

type shareData struct {
	Handle      string `json:"handle"`
	HandleID    string `json:"handle_id"`
	ExpiresAtMs int64  `json:"expires_at_ms"`
	Audience    string `json:"audience"`
}

func (a *API) callFetch(c echo.Context) error {
	object, err := readObject(c)
	if err != nil {
		return a.refuse(c, err)
	}
	peer, okPeer := stringField(object, "peer")
	token, okHandle := stringField(object, "handle")
	if !okPeer || !okHandle {
		return a.refuse(c, refusal.WithMessage(refusal.InvalidInput, `"peer" and "handle" are required non-empty strings.`))
	}
	result, err := a.fetch.Fetch(c.Request().Context(), application.FetchInput{Peer: peer, Handle: token})
	if err != nil {
		return a.refuse(c, err)
	}
	data := fetchData{Path: result.Path, Bytes: result.Bytes, SHA256: result.SHA256, Peer: result.Peer}
	if result.HasGeneration {
		data.Generation = &result.Generation
	}
	return c.JSON(http.StatusOK, toolAnswer{Data: data, Summary: result.Summary()})
}

type fetchData struct {
	Path       string  `json:"path"`
	Bytes      int64   `json:"bytes"`
	SHA256     string  `json:"sha256"`
	Generation *uint64 `json:"generation,omitempty"`
	Peer       string  `json:"peer"`
}
