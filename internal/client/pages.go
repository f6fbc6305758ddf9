package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/corral-sched/corral/internal/api"
)

// QueuePage returns one page of the queue (GET /queue?limit=&cursor=):
// limit 0 is the server's default (500); cursor "" is the head. The
// page's NextCursor asks for the next one.
func (c *Client) QueuePage(ctx context.Context, limit int, cursor string) (api.QueueResponse, error) {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	var q api.QueueResponse
	err := c.call(ctx, request{method: http.MethodGet, path: "/queue", query: v}, &q)
	return q, err
}

// queueAllPage is how many jobs QueueAll asks for at a time.
const queueAllPage = 100000

// QueueAll returns the whole queue, following the pages.
func (c *Client) QueueAll(ctx context.Context) (api.QueueResponse, error) {
	q, err := c.QueuePage(ctx, queueAllPage, "")
	for err == nil && q.NextCursor != "" {
		var p api.QueueResponse
		if p, err = c.QueuePage(ctx, queueAllPage, q.NextCursor); err == nil {
			q.QueuedJobs = append(q.QueuedJobs, p.QueuedJobs...)
			q.NextCursor = p.NextCursor
		}
	}
	return q, err
}

// JobsAll lists every job that f matches, newest first, following the
// pages of GET /jobs (f.Limit jobs at a time; 0: the server's default).
func (c *Client) JobsAll(ctx context.Context, f JobFilter) (api.JobList, error) {
	l, err := c.Jobs(ctx, f)
	seen := map[string]bool{}
	for _, a := range l.Arrays {
		seen[a.ID] = true
	}
	for err == nil && l.NextCursor != "" {
		f.Cursor = l.NextCursor
		var p api.JobList
		if p, err = c.Jobs(ctx, f); err == nil {
			l.Jobs = append(l.Jobs, p.Jobs...)
			for _, a := range p.Arrays {
				if !seen[a.ID] {
					seen[a.ID] = true
					l.Arrays = append(l.Arrays, a)
				}
			}
			l.NextCursor = p.NextCursor
		}
	}
	return l, err
}
