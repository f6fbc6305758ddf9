package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestNumbersShown: the submission's line says the job's number; queue
// and jobs show it first (a task as N_I), show and array show a Number
// line, the GPU table the holder's number before its id.
func TestNumbersShown(t *testing.T) {
	f := newFakeServer(t)
	task := 2
	f.on("POST", "/queue/submit", http.StatusCreated, api.Job{ID: "j01new", Number: 12, State: api.StateQueued, QueuePosition: 3, Priority: api.PriorityNormal})
	f.on("GET", "/queue", 200, api.QueueResponse{QueuedJobs: []api.QueuedJob{
		{ID: "j01aaa", Number: 12, User: "ana", QueuePosition: 1, Priority: api.PriorityNormal},
		{ID: "j01bbb_2", Number: 13, ArrayJobID: "j01bbb", ArrayTaskID: &task, User: "ana", QueuePosition: 2, Priority: api.PriorityNormal},
	}})
	f.on("GET", "/jobs", 200, api.JobList{Jobs: []api.Job{{ID: "j01aaa", Number: 12, User: "ana", State: api.StateRunning, Priority: api.PriorityNormal}}})
	f.on("GET", "/jobs/12", 200, api.Job{ID: "j01aaa", Number: 12, User: "ana", State: api.StateRunning, Priority: api.PriorityNormal})
	f.on("GET", "/arrays/13", 200, api.Array{ID: "j01bbb", Number: 13, TaskCount: 4, TaskMin: 0, TaskMax: 3, Priority: api.PriorityNormal})
	for _, c := range []struct {
		args []string
		want []string // lines (or their starts, by fields) in order
	}{
		{[]string{"submit", "--", "true"}, []string{"submitted job j01new (number 12, queued, position 3)"}},
		{[]string{"queue", "--expand"}, []string{"NUM ID USER STATE", "12 j01aaa ana running"}},
		{[]string{"queue", "--expand", "--state", "queued"}, []string{"NUM POS ID", "12 1 j01aaa", "13_2 2 j01bbb_2"}},
		{[]string{"jobs"}, []string{"NUM ID NAME", "12 j01aaa"}},
		{[]string{"show", "12"}, []string{"Number: 12", "ID: j01aaa"}},
		{[]string{"array", "show", "13"}, []string{"Number: 13 (tasks 13_0 to 13_3)", "ID: j01bbb"}},
	} {
		res := f.run(c.args...)
		if res.code != 0 {
			t.Errorf("%q: exit %d, %s", c.args, res.code, res.stderr)
			continue
		}
		lines := strings.Split(res.stdout, "\n")
		for i, w := range c.want {
			if i >= len(lines) || !strings.HasPrefix(strings.Join(strings.Fields(lines[i]), " "), w) {
				t.Errorf("%q: line %d is not %q:\n%s", c.args, i, w, res.stdout)
			}
		}
	}
}
