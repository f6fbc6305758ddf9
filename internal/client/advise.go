package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/corral-sched/corral/internal/api"
)

// Advise returns the load profile of the period since (GET /advise; "30d",
// "720h" or an RFC 3339 time; empty: the server's default, 30 days).
func (c *Client) Advise(ctx context.Context, since string) (api.LoadProfile, error) {
	var p api.LoadProfile
	q := url.Values{}
	if since != "" {
		q.Set("since", since)
	}
	err := c.call(ctx, request{method: http.MethodGet, path: "/advise", query: q}, &p)
	return p, err
}
