package api

import "time"

// ResetAttempt clears what belonged to the job's last attempt when it
// goes back to the queue (or ends without it): its start, exit code,
// GPUs and node, a loan or a preemption under way, its idleness.
func (j *Job) ResetAttempt() {
	j.StartedAt, j.ExitCode = nil, nil
	j.Allocation, j.NodeID = []Allocation{}, ""
	j.Borrowed, j.Preempting, j.PreemptMessage = false, false, ""
	j.Idle, j.IdleSince = false, nil
}

// LastEntered is when the job last entered state to, by its events;
// zero when it never did.
func (j *Job) LastEntered(to State) time.Time {
	for i := len(j.Events) - 1; i >= 0; i-- {
		if j.Events[i].To == to {
			return j.Events[i].At
		}
	}
	return time.Time{}
}
