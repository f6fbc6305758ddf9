package bookings

import (
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/jobspec"
)

// How bookings' refusals and notices write GPUs, times and names.

// keysText says which GPUs: "GPUs 0-7 on node-1".
func keysText(ks []gpuKey) string {
	as := make([]api.Allocation, len(ks))
	for i, k := range ks {
		as[i] = api.Allocation{NodeID: k.node, GPUID: k.index}
	}
	return holds.GPUs(as)
}

// stamp writes a time for people: "2026-12-01 09:00 UTC".
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// window writes a span: "2026-12-01 09:00-17:00 UTC", or both dates when
// it crosses midnight.
func window(w span) string {
	s, e := w.start.UTC(), w.end.UTC()
	if s.Format("2006-01-02") == e.Format("2006-01-02") {
		return s.Format("2006-01-02 15:04") + "-" + e.Format("15:04 UTC")
	}
	return s.Format("2006-01-02 15:04") + " to " + e.Format("2006-01-02 15:04 UTC")
}

// trimmedSet is names trimmed, without empty ones and repeats, in order
// (nil when none is left).
func trimmedSet(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// A user or project name is checked as a submission's (package jobspec).
const maxUserLen = jobspec.MaxUserLen

var userName = jobspec.UserName

// truncate cuts s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
