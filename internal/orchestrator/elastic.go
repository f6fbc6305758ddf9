package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// elasticJob sets the elastic part of the core's view of queued job j:
// its minimum, and when its wait for the maximum ends.
func elasticJob(sj *sched.Job, j *api.Job) {
	if j.GPUCountMin <= 0 {
		return
	}
	sj.GPUsMin, sj.ElasticUntil = j.GPUCountMin, j.SubmittedAt
	if j.ElasticWait != nil {
		sj.ElasticUntil = j.SubmittedAt.Add(j.ElasticWait.Duration())
	}
}
