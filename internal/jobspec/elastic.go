package jobspec

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// maxElasticWait bounds elastic_wait: a job that would rather wait longer
// for its maximum should ask for a fixed count.
const maxElasticWait = 7 * 24 * time.Hour

// validateElastic checks the elastic part of a submission (gpu_count_min,
// elastic_wait) against the job validateSubmit has built so far (its
// gpu_count and nodes settled) and fills it in. A minimum equal to
// gpu_count is a fixed count and is dropped. Every error names its field.
func validateElastic(req *api.SubmitRequest, j *api.Job) error {
	if req.GPUCountMin == nil {
		if !api.IsNull(req.ElasticWait) {
			return api.Invalid("elastic_wait", "applies only to an elastic GPU count: give gpu_count_min too (--gpus MIN-MAX)")
		}
		return nil
	}
	min := *req.GPUCountMin
	switch {
	case j.GPUCount < 0:
		return nil // checkGPURequest names gpu_count
	case j.GPUCount == 0:
		return api.Invalid("gpu_count_min", "needs a gpu_count of 1 or more; a job with no GPUs has no count to shrink")
	case min < 1:
		return api.Invalid("gpu_count_min", "must be 1 or more, not %d", min)
	case min > j.GPUCount:
		return api.Invalid("gpu_count_min", "is %d, more than gpu_count (%d), the maximum", min, j.GPUCount)
	case j.Nodes > 1:
		return api.Invalid("gpu_count_min", "an elastic GPU count is for one-node jobs; a %d-node gang takes gpu_count on each node", j.Nodes)
	}
	if min < j.GPUCount {
		j.GPUCountMin = min
	}
	if api.IsNull(req.ElasticWait) {
		return nil
	}
	d, err := api.ParseSecondsJSON(req.ElasticWait)
	if err != nil {
		return api.Invalid("elastic_wait", "%s", err.Error())
	}
	if d.Duration() < 0 || d.Duration() > maxElasticWait {
		return api.Invalid("elastic_wait", "must be between 0 and %s, not %s", maxElasticWait, d.Duration())
	}
	if j.GPUCountMin > 0 && d.Duration() > 0 {
		j.ElasticWait = &d
	}
	return nil
}
