package agents

import (
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// Each rank gets its -o/-e paths expanded for itself, and its --signal
// counted from its start: the limit less the signal's lead.
func TestJobIOPerRank(t *testing.T) {
	task := 3
	cases := []struct {
		name           string
		t              exec.Task
		rank           int
		out, errp, sig string
		after          api.Seconds
	}{
		{name: "plain", t: exec.Task{JobID: "J1", Name: "sweep", User: "ana", Output: "o-%j-%x-%u-%N-%t.log", Error: "/e/%A_%a.err",
			TimeLimit: 5 * time.Minute, Signal: "USR1@60"}, rank: 1, out: "o-J1-sweep-ana-n2-1.log", errp: "/e/J1_0.err", sig: "USR1", after: 240},
		{name: "array task", t: exec.Task{JobID: "A_3", ArrayJobID: "A", ArrayTask: &task, Output: "%A-%4a-%%", TimeLimit: 30 * time.Second,
			Signal: "B:TERM@90"}, out: "A-0003-%", sig: "B:TERM", after: 0},
		{name: "no limit, no signal", t: exec.Task{JobID: "J", Signal: "USR1@60"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s api.TaskSpec
			jobIO(&s, c.t, c.rank, "n2")
			if s.Output != c.out || s.Error != c.errp || s.Signal != c.sig || s.SignalAfter != c.after {
				t.Fatalf("got out %q err %q signal %q after %v; want %q %q %q %v", s.Output, s.Error, s.Signal, s.SignalAfter, c.out, c.errp, c.sig, c.after)
			}
		})
	}
}
