package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/corral-sched/corral/internal/api"
)

// QueueFilter narrows QueueOf: one user's rows (User), or the caller's
// (Mine "true": the server resolves the token's user; "auto": a user's
// own, everyone's for admins and viewers). Zero fields do not filter.
type QueueFilter struct {
	User  string
	Mine  string
	Limit int  // jobs a page; 0: the server's default (500)
	All   bool // every page
}

// QueueOf returns the queue's rows that f keeps, in the queue's order, each
// with its place in the whole queue (GET /queue?user=&mine=): one page, or
// every page with f.All.
func (c *Client) QueueOf(ctx context.Context, f QueueFilter) (api.QueueResponse, error) {
	limit := f.Limit
	if f.All {
		limit = queueAllPage
	}
	q, err := c.queueOfPage(ctx, f, limit, "")
	for err == nil && f.All && q.NextCursor != "" {
		var p api.QueueResponse
		if p, err = c.queueOfPage(ctx, f, limit, q.NextCursor); err == nil {
			q.QueuedJobs = append(q.QueuedJobs, p.QueuedJobs...)
			q.NextCursor = p.NextCursor
		}
	}
	return q, err
}

func (c *Client) queueOfPage(ctx context.Context, f QueueFilter, limit int, cursor string) (api.QueueResponse, error) {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if f.User != "" {
		v.Set("user", f.User)
	}
	if f.Mine != "" {
		v.Set("mine", f.Mine)
	}
	var q api.QueueResponse
	err := c.call(ctx, request{method: http.MethodGet, path: "/queue", query: v}, &q)
	return q, err
}
