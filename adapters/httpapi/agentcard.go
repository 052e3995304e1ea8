package httpapi

import (
	"github.com/a2aproject/a2a-go/a2a"

	"github.com/resplane/resplane/domain/proof"
)

// Identity is what our agent card states about this capsule instance.
type Identity struct {
	Name      string
	Version   string
	URL       string
	SessionID string
	Planes    []string
	// PeerProof is --peer-proof; under proof.Off the card carries no peer-plane extension.
	PeerProof proof.Mode
	// ProofKey is the Ed25519 public key this capsule proves possession with, nil for none.
	ProofKey []byte
	// PeerFiles are the exports.peer_files limits of the handles this capsule mints, nil when
	// the card advertises none.
	PeerFiles *PeerFilesLimits
}

// PeerFilesLimits are the declared exports.peer_files limits, as the card advertises them.
type PeerFilesLimits struct {
	MaxBytes int64
	MaxTTLMs int64
}

// AgentCard is our rendered card, served at /.well-known/agent-card.json.
type AgentCard struct {
	JSON []byte
}

// cardBody is an A2A 0.3 AgentCard (peers read name and url from its top level) extended with
// two top-level fields of our own, so operators can discover the session and its planes. Its
// capabilities replace the embedded card's, so that the peer-plane extension carries
// "required": false, which a2a.AgentExtension leaves out.
type cardBody struct {
	a2a.AgentCard
	Capabilities cardCapabilities `json:"capabilities"`
	SessionID    string           `json:"session_id"`
	Serves       cardServes       `json:"serves"`
}

// cardCapabilities are the A2A AgentCapabilities we declare: none of the optional features,
// and at most the peer-plane extension.
type cardCapabilities struct {
	Extensions []cardExtension `json:"extensions,omitempty"`
}

// cardExtension is an A2A AgentExtension.
type cardExtension struct {
	URI         string              `json:"uri"`
	Description string              `json:"description"`
	Required    bool                `json:"required"`
	Params      peerPlaneParameters `json:"params"`
}

// peerPlaneParameters are the peer-plane extension's params (docs/http-api.md,
// "The agent card").
type peerPlaneParameters struct {
	ProofKey  *proof.PublicJWK `json:"proof_key,omitempty"`
	PeerFiles *peerFilesParams `json:"peer_files,omitempty"`
}

type peerFilesParams struct {
	MaxBytes int64 `json:"max_bytes"`
	MaxTTLMs int64 `json:"max_ttl_ms"`
}

// peerPlaneDescription describes the extension to a reader of the card.
const peerPlaneDescription = "resplane peer plane: handles minted for this capsule are bound to proof_key " +
	"(RFC 7638 thumbprint) and redeemed with an RFC 9449 DPoP proof; peer_files are the limits of the handles it mints."

// extensionsOf is the card's capabilities.extensions for id: the peer-plane extension when
// --peer-proof is not off and there is a proof key or a peer_files plane to advertise, else
// none.
func extensionsOf(id Identity) []cardExtension {
	if id.PeerProof == proof.Off || (id.ProofKey == nil && id.PeerFiles == nil) {
		return nil
	}
	params := peerPlaneParameters{}
	if id.ProofKey != nil {
		jwk := proof.JWKOf(id.ProofKey)
		params.ProofKey = &jwk
	}
	if l := id.PeerFiles; l != nil {
		params.PeerFiles = &peerFilesParams{MaxBytes: l.MaxBytes, MaxTTLMs: l.MaxTTLMs}
	}
	return []cardExtension{{URI: proof.ExtensionURI, Description: peerPlaneDescription, Params: params}}
}

type cardServes struct {
	Planes []string `json:"planes"`
}

// a2aProtocolVersion is the A2A protocol version whose card shape we publish.
const a2aProtocolVersion = "0.3.0"

// NewAgentCard renders the card for id once; it never changes during a session.
func NewAgentCard(id Identity) AgentCard {
	planes := id.Planes
	if planes == nil {
		planes = []string{}
	}
	body := cardBody{
		AgentCard: a2a.AgentCard{
			Name:               id.Name,
			Version:            id.Version,
			URL:                id.URL,
			ProtocolVersion:    a2aProtocolVersion,
			Description:        "Capsule " + id.Name + ": read-only resource plane served by resplane.",
			DefaultInputModes:  []string{"text/plain"},
			DefaultOutputModes: []string{"text/plain"},
			Skills:             []a2a.AgentSkill{},
		},
		Capabilities: cardCapabilities{Extensions: extensionsOf(id)},
		SessionID:    id.SessionID,
		Serves:       cardServes{Planes: planes},
	}
	return AgentCard{JSON: encodeJSON(body)}
}
