package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// sweepJobs is n unfinished jobs named sweep, plus a finished one and one
// of another name, as GET /jobs might answer.
func sweepJobs(f *fakeServer, n int) []string {
	var ids []string
	jobs := []api.Job{{ID: "01JDONE", Name: "sweep", State: api.StateCompleted, Priority: api.PriorityNormal}, {ID: "01JOTHER", Name: "other", State: api.StateQueued, Priority: api.PriorityNormal}}
	for i := range n {
		id := fmt.Sprintf("01JSWEEP%02d", i)
		ids = append(ids, id)
		st := api.StateQueued
		if i == 0 {
			st = api.StateRunning
		}
		jobs = append(jobs, api.Job{ID: id, Name: "sweep", User: "ana", State: st, Priority: api.PriorityNormal})
		f.on("DELETE", "/queue/"+id, http.StatusOK, api.Job{ID: id, State: api.StateCanceled, Priority: api.PriorityNormal})
	}
	f.on("GET", "/jobs", http.StatusOK, api.JobList{Jobs: jobs})
	f.on("GET", "/auth/whoami", http.StatusOK, api.Whoami{User: "ana", Role: api.RoleUser})
	return ids
}

func deletes(f *fakeServer) []string {
	var out []string
	for _, r := range f.requests() {
		if r.Method == "DELETE" {
			out = append(out, strings.TrimPrefix(r.Path, "/queue/"))
		}
	}
	return out
}

// TestCancelByFilter: a filter selects the unfinished jobs that match it,
// asking the server with the filter for each unfinished state; more than
// 10 are canceled only with --yes, and without it nothing is canceled and
// the exit code is 1 with a message naming --yes.
func TestCancelByFilter(t *testing.T) {
	f := newFakeServer(t)
	ids := sweepJobs(f, 12)

	res := f.run("cancel", "--name", "sweep", "--user", "ana")
	if res.code != exitError || !strings.Contains(res.stderr, "--yes") || !strings.Contains(res.stderr, "12 jobs") ||
		!strings.Contains(res.stderr, ids[0]) || !strings.Contains(res.stderr, "7 more") {
		t.Errorf("without --yes: exit %d, stderr %q", res.code, res.stderr)
	}
	if d := deletes(f); len(d) != 0 {
		t.Fatalf("without --yes it canceled %v", d)
	}
	var states []string
	for _, r := range f.requests() {
		if r.Path != "/jobs" {
			continue
		}
		q, _ := url.ParseQuery(r.Query)
		if q.Get("name") != "sweep" || q.Get("user") != "ana" {
			t.Errorf("GET /jobs?%s lacks the filter", r.Query)
		}
		states = append(states, q.Get("state"))
	}
	if got := strings.Join(states, ","); got != "queued,scheduled,allocating,running" {
		t.Errorf("states asked: %s", got)
	}

	res = f.run("cancel", "--name", "sweep", "--yes")
	if res.code != 0 {
		t.Fatalf("with --yes: exit %d, %q", res.code, res.stderr)
	}
	if d := strings.Join(deletes(f), ","); d != strings.Join(ids, ",") {
		t.Errorf("canceled %s, want %s", d, strings.Join(ids, ","))
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 13 || lines[0] != "canceled job "+ids[0] || lines[12] != "12 of 12 jobs canceled or being stopped, 0 failed" {
		t.Errorf("stdout:\n%s", res.stdout)
	}
}

// TestCancelSelection: ten or fewer jobs need no --yes; several ids are
// each canceled, one line each and a summary, and the exit code is 1 when
// any cancel failed; an id given twice is canceled once; -o json gives
// the canceled jobs and the failures.
func TestCancelSelection(t *testing.T) {
	f := newFakeServer(t)
	ids := sweepJobs(f, 3)
	if res := f.run("cancel", "--state", "queued", "--name", "sweep"); res.code != 0 || len(deletes(f)) != 3 {
		t.Errorf("3 jobs: exit %d, canceled %v, %q", res.code, deletes(f), res.stderr)
	}
	if q := f.requests()[0].Query; !strings.Contains(q, "state=queued") {
		t.Errorf("--state: asked %q", q)
	}

	f = newFakeServer(t)
	ids = sweepJobs(f, 2)
	res := f.run("cancel", ids[0], "01JGONE", ids[1], ids[0])
	if res.code != exitError || !strings.Contains(res.stderr, "1 of 3 cancels failed") {
		t.Errorf("a failed cancel: exit %d, stderr %q", res.code, res.stderr)
	}
	want := "canceled job " + ids[0] + "\njob 01JGONE: no route /queue/01JGONE\ncanceled job " + ids[1] + "\n2 of 3 jobs canceled or being stopped, 1 failed\n"
	if res.stdout != want {
		t.Errorf("stdout = %q, want %q", res.stdout, want)
	}

	res = f.run("-o", "json", "cancel", ids[0], "01JGONE")
	var got cancelResult
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil || res.code != exitError ||
		len(got.Canceled) != 1 || got.Canceled[0].ID != ids[0] || len(got.Failed) != 1 || got.Failed[0].JobID != "01JGONE" {
		t.Errorf("-o json: exit %d, %s (%v)", res.code, res.stdout, err)
	}

	f = newFakeServer(t)
	f.on("GET", "/jobs", http.StatusOK, api.JobList{Jobs: []api.Job{{ID: "01JDONE", Name: "x", State: api.StateFailed, Priority: api.PriorityNormal}}})
	if res := f.run("cancel", "--name", "x"); res.code != 0 || res.stdout != "no unfinished jobs match\n" || len(deletes(f)) != 0 {
		t.Errorf("nothing matched: exit %d, %q", res.code, res.stdout)
	}
}

// TestShortIDs: each id is cut to its shortest prefix of at least the
// minimum that no other id shares; ids that share more keep more, an id
// that is another's prefix stays whole, and order is kept.
func TestShortIDs(t *testing.T) {
	for _, tc := range []struct {
		ids, want []string
	}{
		{nil, []string{}},
		{[]string{"j01abcdefghij"}, []string{"j01abcde"}},
		{[]string{"j01abcdefgh1x", "j01abcdefgh2y", "j02zzzzzzzzzz"}, []string{"j01abcdefgh1", "j01abcdefgh2", "j02zzzzz"}},
		{[]string{"j01ab", "j01abcdefghij"}, []string{"j01ab", "j01abcde"}},
		{[]string{"j01abcdefgh", "j01abcdefghij"}, []string{"j01abcdefgh", "j01abcdefghi"}},
		{[]string{"j2aaaaaaaaaa", "j1aaaaaaaaaa"}, []string{"j2aaaaaa", "j1aaaaaa"}},
	} {
		if got := shortIDs(tc.ids, 8); !slices.Equal(got, tc.want) {
			t.Errorf("shortIDs(%v) = %v, want %v", tc.ids, got, tc.want)
		}
	}
}
