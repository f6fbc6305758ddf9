package client

import (
	"context"
	"net/http"

	"github.com/corral-sched/corral/internal/api"
)

// ActiveJobs returns the caller's unfinished jobs and arrays, newest
// first, with their numbers (GET /complete/jobs): what shell completion
// offers.
func (c *Client) ActiveJobs(ctx context.Context) (api.JobRefList, error) {
	var l api.JobRefList
	err := c.call(ctx, request{method: http.MethodGet, path: "/complete/jobs"}, &l)
	return l, err
}
