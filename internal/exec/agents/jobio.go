package agents

import (
	"strconv"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/batchscript"
	"github.com/corral-sched/corral/internal/exec"
)

// jobIO fills a rank's batch script, output files and signal:
// the -o/-e patterns expanded for this rank on node, and the signal's
// time counted from the task's start.
func jobIO(spec *api.TaskSpec, t exec.Task, rank int, node string) {
	spec.Script = t.Script
	f := Fields(t, node, rank)
	if t.Output != "" {
		spec.Output = batchscript.Expand(t.Output, f, true)
	}
	if t.Error != "" {
		spec.Error = batchscript.Expand(t.Error, f, true)
	}
	if t.Signal == "" || t.TimeLimit <= 0 {
		return
	}
	s, err := batchscript.ParseSignal(t.Signal)
	if err != nil {
		return // checked at submission
	}
	spec.Signal = s.Name
	if s.Batch {
		spec.Signal = "B:" + s.Name
	}
	spec.SignalAfter = api.Seconds(max(t.TimeLimit-s.Lead, 0).Seconds())
}

// Fields are the values of an attempt's -o/-e patterns on node for rank:
// %j the job id, %x its name, %u its owner, %A its array's id (else the
// job id), %a its index in the array (else 0), %N the node, %n and %t the
// rank.
func Fields(t exec.Task, node string, rank int) batchscript.Fields {
	f := batchscript.Fields{'j': t.JobID, 'x': t.Name, 'u': t.User, 'A': t.JobID, 'a': "0",
		'N': node, 'n': strconv.Itoa(rank), 't': strconv.Itoa(rank)}
	if t.ArrayJobID != "" && t.ArrayTask != nil {
		f['A'], f['a'] = t.ArrayJobID, strconv.Itoa(*t.ArrayTask)
	}
	return f
}
