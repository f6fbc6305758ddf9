package orchestrator

// JobOwner returns the user and project of a job.
func (o *Orchestrator) JobOwner(id string) (user, project string, ok bool) {
	j, ok := o.jobAnywhere(id, false) // reads.go: or one that ended, read without the lock
	if !ok {
		return "", "", false
	}
	return j.User, j.Project, true
}

// HoldOwner returns the user who holds GPUs under id.
func (o *Orchestrator) HoldOwner(id string) (user string, ok bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	h, ok := o.holds.Get(id)
	if !ok {
		if j := o.holdJob(id); j != nil { // a hold queued as a job (holds.go)
			return j.User, true
		}
		return "", false
	}
	return h.User, true
}
