package main

import (
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestCompleteJobIDs: the commands that take a job complete it to the
// caller's unfinished jobs' numbers, with name and state beside each, in
// one call; arrays where an array is taken; nothing (and no files) when
// the server cannot be asked.
func TestCompleteJobIDs(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/complete/jobs", 200, api.JobRefList{Jobs: []api.JobRef{
		{Number: 12, ID: "j12", Name: "sweep", State: api.StateRunning, Array: true},
		{Number: 11, ID: "j11", Name: "train", State: api.StateRunning},
		{Number: 7, ID: "j7", State: api.StateQueued},
		{ID: "jold", Name: "legacy", State: api.StateQueued},
	}})
	t.Setenv("CORRAL_SERVER", f.srv.URL)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"cancel", ""}, []string{"12\tsweep (array, running)", "11\ttrain (running)", "7\t(queued)", "jold\tlegacy (queued)"}},
		{[]string{"cancel", "1"}, []string{"12\tsweep (array, running)", "11\ttrain (running)"}},
		{[]string{"cancel", "11", ""}, []string{"12\tsweep (array, running)", "7\t(queued)", "jold\tlegacy (queued)"}},
		{[]string{"logs", ""}, []string{"11\ttrain (running)", "7\t(queued)", "jold\tlegacy (queued)"}},
		{[]string{"logs", "11", ""}, nil},
		{[]string{"show", ""}, []string{"12\tsweep (array, running)", "11\ttrain (running)", "7\t(queued)", "jold\tlegacy (queued)"}},
		{[]string{"array", "show", ""}, []string{"12\tsweep (array, running)"}},
		{[]string{"priority", "7", "h"}, []string{"high"}},
	} {
		before := len(f.requests())
		res := runArgs(append([]string{"__complete"}, c.args...)...)
		lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
		if res.code != 0 || len(lines) == 0 || lines[len(lines)-1] != ":4" { // ShellCompDirectiveNoFileComp
			t.Errorf("%q: exit %d, %q %q; want the no-files directive :4", c.args, res.code, res.stdout, res.stderr)
			continue
		}
		if got := lines[:len(lines)-1]; strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q: %q; want %q", c.args, got, c.want)
		}
		if n := len(f.requests()) - before; n > 1 {
			t.Errorf("%q: %d requests; want at most one", c.args, n)
		}
	}

	f.on("GET", "/complete/jobs", 401, api.ErrorBody{Error: api.ErrorDetail{Code: "unauthenticated", Message: "no"}})
	res := runArgs("__complete", "cancel", "")
	if res.code != 0 || res.stdout != ":4\n" {
		t.Errorf("completion without a token: exit %d, %q; want nothing offered, quietly", res.code, res.stdout)
	}
}
