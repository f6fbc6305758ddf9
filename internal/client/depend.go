package client

import (
	"context"
	"net/http"

	"github.com/corral-sched/corral/internal/api"
)

// SetDependency replaces a queued job's depends_on (PATCH
// /queue/{id}/dependency); "" removes it.
func (c *Client) SetDependency(ctx context.Context, id, dependsOn string) (api.Job, error) {
	p, err := pathID("job", id)
	if err != nil {
		return api.Job{}, err
	}
	var job api.Job
	err = c.call(ctx, request{method: http.MethodPatch, path: "/queue/" + p + "/dependency", body: api.DependencyRequest{DependsOn: &dependsOn}}, &job)
	return job, err
}
