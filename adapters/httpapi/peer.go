package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/resplane/resplane/application"
)

// redeem answers /resources/peer[/<token>]. rest is the raw target after "/resources/peer".
func (h *Resources) redeem(c echo.Context, shared application.Request, rest string) error {
	r := c.Request()
	req := application.RedeemRequest{Request: shared, Rest: rest, Proofs: r.Header.Values(headerDPoP), Host: r.Host}
	if values := r.Header.Values(headerAudience); len(values) > 0 {
		req.Audience, req.AudienceSent = values[len(values)-1], true
	}
	answer, err := h.peer.Do(r.Context(), req)
	var headers map[string]string
	if answer.Traced {
		headers = map[string]string{headerGeneration: formatUint(answer.Generation), headerHandleID: answer.HandleID}
	}
	if err != nil {
		return writeRefusal(c, err, headers)
	}
	served := answer.Served
	defer served.Body.Release()
	headers[headerContainment] = served.Containment.String()
	return h.writeServed(c, headers, served.Body)
}
