package jobspec

import "github.com/corral-sched/corral/internal/api"

// What a change of a job that is already queued or running must pass,
// as Parse is what a submission must.

// Priority is the priority a change asks for (PATCH of a job's
// priority): required, one of the priorities the API names, the error
// naming the field "priority".
func Priority(raw api.RawValue) (api.Priority, error) {
	if api.IsNull(raw) {
		return 0, api.Invalid("priority", "is required")
	}
	p, err := api.ParsePriorityJSON(raw)
	if err != nil {
		return 0, api.Invalid("priority", "%s", err.Error())
	}
	return p, nil
}

// NotEnded refuses a change of a job that has ended: 409 wrong_state,
// naming its state. Nil while it is queued or running.
func NotEnded(j *api.Job) error {
	if j.State.Terminal() {
		return api.Conflict("wrong_state", "job %s is already %s", j.ID, j.State)
	}
	return nil
}
