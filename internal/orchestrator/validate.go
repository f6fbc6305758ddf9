package orchestrator

import "github.com/corral-sched/corral/internal/jobspec"

// The names and bounds a submission is checked by are package jobspec's;
// the orchestrator checks a few other names (nodes, bookings' users,
// quotas' keys) by the same rules.
const maxUserLen = jobspec.MaxUserLen

var userName = jobspec.UserName

// truncate shortens s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
