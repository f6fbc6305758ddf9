package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Array returns a job array: its spec, counts by state and task indexes
// (GET /arrays/{id}; id may be a unique prefix).
func (c *Client) Array(ctx context.Context, id string) (api.Array, error) {
	p, err := pathID("array", id)
	if err != nil {
		return api.Array{}, err
	}
	var a api.Array
	err = c.call(ctx, request{method: http.MethodGet, path: "/arrays/" + p}, &a)
	return a, err
}

// SetThrottle sets how many of an array's tasks may be active at once, 0
// for no limit (PATCH /arrays/{id}).
func (c *Client) SetThrottle(ctx context.Context, id string, n int) (api.Array, error) {
	p, err := pathID("array", id)
	if err != nil {
		return api.Array{}, err
	}
	var a api.Array
	err = c.call(ctx, request{method: http.MethodPatch, path: "/arrays/" + p, body: api.ArrayRequest{Throttle: &n}}, &a)
	return a, err
}

// CancelArray cancels every unfinished task of an array (DELETE
// /arrays/{id}); running ones get SIGTERM, then SIGKILL after grace
// (zero: the server's default).
func (c *Client) CancelArray(ctx context.Context, id string, grace time.Duration) (api.Array, error) {
	p, err := pathID("array", id)
	if err != nil {
		return api.Array{}, err
	}
	r := request{method: http.MethodDelete, path: "/arrays/" + p}
	if grace > 0 {
		r.query = url.Values{"grace": {grace.String()}}
	}
	var a api.Array
	err = c.call(ctx, r, &a)
	return a, err
}
