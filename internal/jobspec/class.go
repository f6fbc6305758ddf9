package jobspec

import "github.com/corral-sched/corral/internal/api"

// parseClass checks a submission's class: empty or batch is batch (stored
// empty), the interactive classes as given. An array may not be
// interactive.
func parseClass(req *api.SubmitRequest) (string, error) {
	switch req.Class {
	case "", api.ClassBatch:
		return "", nil
	case api.ClassPreemptible:
		return req.Class, nil
	case api.ClassInteractive, api.ClassInteractivePreemptible:
		if req.Array != "" {
			return "", api.Invalid("class", "%s is for one job; a job array must be batch", req.Class)
		}
		return req.Class, nil
	}
	return "", api.Invalid("class", "%q is not batch, preemptible, interactive or interactive-preemptible", truncate(req.Class, 40))
}
