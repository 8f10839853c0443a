package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// maxJSZ bounds the /jsz answer read: a monitor with many streams answers a few KB each.
const maxJSZ = 64 << 20

// StreamMessages is the message count of stream as the nats-server monitor at monitor (host:port)
// reports it on /jsz?streams=true: every message the stream holds, read or not; 0 when the server has
// no such stream. It is how the tests (and a user with curl) count what a server stored.
func StreamMessages(ctx context.Context, client *http.Client, monitor, stream string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+monitor+"/jsz?streams=true", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("nats monitor %s: %w", monitor, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("nats monitor %s: /jsz answered %s", monitor, resp.Status)
	}
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name  string `json:"name"`
				State struct {
					Messages int `json:"messages"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSZ)).Decode(&jsz); err != nil {
		return 0, fmt.Errorf("nats monitor %s: /jsz: %w", monitor, err)
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.State.Messages, nil
			}
		}
	}
	return 0, nil
}
