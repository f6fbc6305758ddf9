package sched

import (
	"slices"
	"strings"
)

// Order returns the queue sorted by the policy: for "priority", higher
// priority first, then earlier submission; for "fcfs" (and any name the core
// does not know), earlier submission alone. Ties break on the job id, so the
// order is total and the same input always gives the same output.
func Order(queue []Job, p Policy) []Job {
	out := slices.Clone(queue)
	byPriority := p.Name == PolicyPriority
	slices.SortFunc(out, func(a, b Job) int {
		if byPriority && a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
