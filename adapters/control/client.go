package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Client calls a running service's control API over its socket, for the resplane client
// subcommands.
type Client struct {
	path string
	http *http.Client
}

// NewClient returns a client for the control socket at path.
func NewClient(path string) *Client {
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return Dial(ctx, path) },
	}
	// A tool call may fetch a large file from a peer; the bound is generous on purpose.
	return &Client{path: path, http: &http.Client{Transport: transport, Timeout: 30 * time.Minute}}
}

// Call sends method on route with body (nil for none) and returns the answer's status and
// body. An error means the service could not be reached or did not answer.
func (c *Client) Call(ctx context.Context, method, route string, body any) (int, []byte, error) {
	var reader io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		reader = bytes.NewReader(encoded)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://control"+route, reader)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, c.unreachable(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the control API's answer: %w", err)
	}
	return resp.StatusCode, answer, nil
}

// unreachable says which socket could not be reached and why, without the request's URL
// (http://control/…, which names nothing the user typed).
func (c *Client) unreachable(err error) error {
	cause := err
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		cause = opErr.Err
	} else if urlErr, ok := errors.AsType[*url.Error](err); ok {
		cause = urlErr.Err
	}
	return fmt.Errorf("the control socket %s cannot be reached (%w): is resplane serve running, and is this the control path its ready line shows?",
		c.path, cause)
}
