package httpapi

import (
	"github.com/a2aproject/a2a-go/a2a"
)

// Identity is what our agent card states about this capsule instance.
type Identity struct {
	Name      string
	Version   string
	URL       string
	SessionID string
	Planes    []string
}

// AgentCard is our rendered card, served at /.well-known/agent-card.json.
type AgentCard struct {
	JSON []byte
}

// cardBody is an A2A 0.3 AgentCard (peers read name and url from its top level) extended with
// two top-level fields of our own, so operators can discover the session and its planes.
type cardBody struct {
	a2a.AgentCard
	SessionID string     `json:"session_id"`
	Serves    cardServes `json:"serves"`
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
			Capabilities:       a2a.AgentCapabilities{},
			DefaultInputModes:  []string{"text/plain"},
			DefaultOutputModes: []string{"text/plain"},
			Skills:             []a2a.AgentSkill{},
		},
		SessionID: id.SessionID,
		Serves:    cardServes{Planes: planes},
	}
	return AgentCard{JSON: encodeJSON(body)}
}
