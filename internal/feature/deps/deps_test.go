package deps

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// The Tracker is a feature of the loop at three moments.
var (
	_ feature.SubmitCheck = (*Tracker)(nil)
	_ feature.Mover       = (*Tracker)(nil)
	_ feature.Eligibility = (*Tracker)(nil)
)

// TestEligiblePipeline: a job afterok on a running one is held, with
// why; it goes once its predecessor completed; one afterok on a job that
// failed is canceled once the timeout has passed, and a job afternotok
// on that one goes in the same pass.
func TestEligiblePipeline(t *testing.T) {
	f := newFake()
	tr := f.tracker(time.Hour)
	f.add("jprep0", api.StateRunning, "")
	f.add("jfit00", api.StateQueued, "afterok:jprep0")
	f.add("jplain", api.StateQueued, "")
	if got := eligible(t, f, t0); !slices.Equal(got, []string{"jplain"}) {
		t.Fatalf("eligible = %v, want only the job without dependencies", got)
	}
	if tr.Held() != 1 {
		t.Fatalf("Held = %d, want 1", tr.Held())
	}
	reason, msg, held := tr.Pending(f.jobs["jfit00"])
	if !held || reason != api.ReasonDependency || msg != "waits for job jprep0 (afterok) to complete; it is running" {
		t.Fatalf("Pending = %q, %q, %v", reason, msg, held)
	}

	f.end("jprep0", api.StateCompleted, t0.Add(time.Minute))
	if got := eligible(t, f, t0.Add(time.Minute)); !slices.Equal(got, []string{"jfit00", "jplain"}) {
		t.Fatalf("eligible = %v, want both once the predecessor completed", got)
	}
	if _, _, held := tr.Pending(f.jobs["jfit00"]); held || tr.Held() != 0 {
		t.Fatalf("still held after its predecessor completed")
	}

	f.add("jfail0", api.StateRunning, "")
	f.add("jeval0", api.StateQueued, "afterok:jfail0")
	f.add("jclean", api.StateQueued, "afternotok:jeval0")
	failedAt := t0.Add(2 * time.Minute)
	f.end("jfail0", api.StateFailed, failedAt)
	eligible(t, f, failedAt.Add(30*time.Minute))
	if reason, _, _ := tr.Pending(f.jobs["jeval0"]); reason != api.ReasonDependencyNeverSatisfied || len(f.canceled) != 0 {
		t.Fatalf("before the timeout: reason %q, canceled %v", reason, f.canceled)
	}
	got := eligible(t, f, failedAt.Add(time.Hour))
	if !slices.Equal(f.canceled, []string{"jeval0"}) || !slices.Contains(got, "jclean") {
		t.Fatalf("after the timeout: canceled %v, eligible %v; want jeval0 canceled and jclean let through", f.canceled, got)
	}
	if j := f.jobs["jeval0"]; j.Reason != api.ReasonDependencyNeverSatisfied || !strings.Contains(j.Message, "afterok on job jfail0 can never be met: it failed") {
		t.Fatalf("canceled with %q: %q", j.Reason, j.Message)
	}
}

// TestEligibleAnyOfAndSingleton: '?' needs one met term; singleton lets
// one job of a user and name run at a time, the first in the queue.
func TestEligibleAnyOfAndSingleton(t *testing.T) {
	f := newFake()
	f.tracker(time.Hour)
	f.add("jdone0", api.StateCompleted, "")
	f.add("jrun00", api.StateRunning, "")
	f.add("jany00", api.StateQueued, "afterok:jrun00?afterany:jdone0")
	a := f.add("jsing1", api.StateQueued, "singleton")
	b := f.add("jsing2", api.StateQueued, "singleton")
	a.Name, b.Name = "train", "train"
	if got := eligible(t, f, t0); !slices.Equal(got, []string{"jany00", "jsing1"}) {
		t.Fatalf("eligible = %v, want the any-of job and the first singleton", got)
	}
	a.State = api.StateRunning
	if got := eligible(t, f, t0); !slices.Equal(got, []string{"jany00"}) {
		t.Fatalf("eligible = %v, want the second singleton held while the first runs", got)
	}
}

// TestEligibleArrays: a term on an array in memory reads its tasks; once
// the array leaves memory (ForgetArray), the store decides: the first task
// that failed, or a stand-in that meets the term.
func TestEligibleArrays(t *testing.T) {
	f := newFake()
	tr := f.tracker(time.Hour)
	f.task("jarr00", 0, api.StateCompleted)
	f.task("jarr00", 1, api.StateRunning)
	f.add("jafter", api.StateQueued, "afterok:jarr00")
	f.add("jnotok", api.StateQueued, "afternotok:jarr00")
	if got := eligible(t, f, t0); len(got) != 0 {
		t.Fatalf("eligible = %v while a task runs", got)
	}
	_, msg, _ := tr.Pending(f.jobs["jafter"])
	if !strings.Contains(msg, "jarr00_1") {
		t.Fatalf("why pending %q does not name the running task", msg)
	}
	f.end("jarr00_1", api.StateCompleted, t0.Add(time.Minute))
	for _, task := range f.arrays["jarr00"] { // the array is done, and leaves memory
		f.done["jarr00"] = append(f.done["jarr00"], *task)
		delete(f.jobs, task.ID)
	}
	delete(f.arrays, "jarr00")
	tr.ForgetArray("jarr00")
	got := eligible(t, f, t0.Add(2*time.Minute))
	if !slices.Equal(got, []string{"jafter"}) {
		t.Fatalf("eligible = %v, want the afterok job on the completed array", got)
	}
	if reason, _, _ := tr.Pending(f.jobs["jnotok"]); reason != api.ReasonDependencyNeverSatisfied {
		t.Fatalf("afternotok on a completed array: reason %q", reason)
	}
}

// TestEligiblePruned: a predecessor the store no longer holds has an
// unknown outcome: afterok can never be met, afterany is.
func TestEligiblePruned(t *testing.T) {
	f := newFake()
	tr := f.tracker(time.Hour)
	f.add("jok000", api.StateQueued, "afterok:jgone0")
	f.add("jany00", api.StateQueued, "afterany:jgone0")
	if got := eligible(t, f, t0); !slices.Equal(got, []string{"jany00"}) {
		t.Fatalf("eligible = %v, want only the afterany job", got)
	}
	if _, msg, _ := tr.Pending(f.jobs["jok000"]); !strings.Contains(msg, "its record was deleted") {
		t.Fatalf("why pending %q", msg)
	}
}

// TestSet: what a depends_on may say, and how its ids resolve.
func TestSet(t *testing.T) {
	f := newFake()
	tr := f.tracker(time.Hour)
	f.add("jaaaa1", api.StateRunning, "")
	f.add("jaaaa2", api.StateRunning, "")
	f.add("jbbbb1", api.StateQueued, "afterok:jcccc1")
	f.add("jcccc1", api.StateQueued, "")
	f.stored["jended"] = api.Job{ID: "jended", State: api.StateCompleted}
	f.task("jarr00", 0, api.StateQueued)
	f.numbers[42] = "jaaaa1"
	ok := map[string]struct{ raw, want string }{
		"full id":    {"afterok:jaaaa1", "afterok:jaaaa1"},
		"prefix":     {"afterany:jbbbb", "afterany:jbbbb1"},
		"ended":      {"afterok:jended", "afterok:jended"},
		"number":     {"after:42", "after:jaaaa1"},
		"array":      {"afterok:jarr00", "afterok:jarr00"},
		"any of":     {"afterok:jaaaa1?afternotok:jaaaa2", "afterok:jaaaa1?afternotok:jaaaa2"},
		"none":       {"", ""},
		"singleton":  {"singleton", "singleton"},
		"aftercorr":  {"aftercorr:jarr00", "aftercorr:jarr00"},
		"task of an": {"afterok:jarr00_0", "afterok:jarr00_0"},
	}
	for name, c := range ok {
		j := &api.Job{Name: "n", ArrayJobID: ""}
		if name == "aftercorr" {
			if err := tr.Set(j, c.raw, true); err != nil || j.DependsOn != c.want {
				t.Errorf("%s: %q, %v; want %q", name, j.DependsOn, err, c.want)
			}
			continue
		}
		if err := tr.Set(j, c.raw, false); err != nil || j.DependsOn != c.want {
			t.Errorf("%s: %q, %v; want %q", name, j.DependsOn, err, c.want)
		}
	}
	bad := map[string]struct {
		job  *api.Job
		raw  string
		says string
	}{
		"syntax":        {&api.Job{}, "afterok", "needs at least one job id"},
		"unknown":       {&api.Job{}, "afterok:jnone00", `no job or array "jnone00"`},
		"short":         {&api.Job{}, "afterok:jx", "a prefix needs at least 5 characters"},
		"ambiguous":     {&api.Job{}, "afterok:jaaaa", "is the prefix of 2 jobs'"},
		"no number":     {&api.Job{}, "afterok:7", "no job number 7"},
		"itself":        {f.jobs["jcccc1"], "afterok:jcccc1", "refers to the job itself"},
		"cycle":         {f.jobs["jcccc1"], "afterok:jbbbb1", "would make a cycle: jcccc1 -> jbbbb1 -> jcccc1"},
		"nameless":      {&api.Job{}, "singleton", "singleton needs the job to have a name"},
		"corr no array": {&api.Job{}, "aftercorr:jarr00", "aftercorr is for job arrays"},
	}
	for name, c := range bad {
		before := c.job.DependsOn
		err := tr.Set(c.job, c.raw, false)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), "depends_on: ") {
			t.Errorf("%s: %v, want an error on depends_on saying %q", name, err, c.says)
		}
		if c.job.DependsOn != before {
			t.Errorf("%s: a refusal changed depends_on to %q", name, c.job.DependsOn)
		}
	}
	if err := tr.Set(&api.Job{}, "aftercorr:jaaaa1", true); err == nil || !strings.Contains(err.Error(), "needs an array's id") {
		t.Errorf("aftercorr on a job: %v", err)
	}
}

// TestForgetAndDependedOn: what pruning must keep, and an ended job
// forgotten by the mover.
func TestForgetAndDependedOn(t *testing.T) {
	f := newFake()
	tr := f.tracker(time.Hour)
	f.add("jwait1", api.StateQueued, "afterok:jpred1:jpred2")
	f.add("jwait2", api.StateQueued, "afterany:jpred2,afterok:jarr00")
	f.add("jover0", api.StateCompleted, "afterok:jpred3") // ended: its predecessor may go
	for _, id := range []string{"jpred1", "jpred2", "jpred3"} {
		f.stored[id] = api.Job{ID: id, State: api.StateRunning}
	}
	eligible(t, f, t0)
	if got := tr.DependedOn(); !slices.Equal(got, []string{"jpred1", "jpred2", "jarr00"}) {
		t.Fatalf("DependedOn = %v", got)
	}
	j := f.jobs["jwait1"]
	if tr.entries[j.ID] == nil {
		t.Fatalf("no entry for a held job")
	}
	tr.Moved(&featuretest.Tx{At: t0}, j, api.Event{From: api.StateQueued, To: api.StateCanceled})
	if tr.entries[j.ID] != nil {
		t.Fatalf("the entry of an ended job is kept")
	}
}

// TestVerdictOf: what each kind of term makes of each state.
func TestVerdictOf(t *testing.T) {
	states := []api.State{api.StateQueued, api.StateRunning, api.StateCompleted, api.StateFailed, api.StateCanceled, statePruned}
	want := map[Kind][]verdict{
		After:      {waiting, met, met, met, met, met},
		AfterAny:   {waiting, waiting, met, met, met, met},
		AfterOK:    {waiting, waiting, met, never, never, never},
		AfterCorr:  {waiting, waiting, met, never, never, never},
		AfterNotOK: {waiting, waiting, never, met, met, never},
	}
	for k, vs := range want {
		for i, s := range states {
			if got := verdictOf(k, s); got != vs[i] {
				t.Errorf("%s on %s: %d, want %d", k, s, got, vs[i])
			}
		}
	}
}

// TestMessages: what a held job's why-pending says, for each kind of
// term and outcome.
func TestMessages(t *testing.T) {
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	running := &api.Job{ID: "jrun", State: api.StateRunning}
	failed := &api.Job{ID: "jfail", State: api.StateFailed}
	cases := map[string]struct {
		c       check
		timeout time.Duration
		want    string
	}{
		"afterok":    {check{verdict: waiting, kind: AfterOK, culprit: running}, time.Hour, "waits for job jrun (afterok) to complete; it is running"},
		"after more": {check{verdict: waiting, kind: After, culprit: running, more: 2}, time.Hour, "waits for job jrun (after) to start; it is running (and for 2 more jobs)"},
		"afternotok": {check{verdict: waiting, kind: AfterNotOK, culprit: running}, time.Hour, "waits for job jrun (afternotok) to fail; it is running"},
		"afterany":   {check{verdict: waiting, kind: AfterAny, culprit: running}, time.Hour, "waits for job jrun (afterany) to end; it is running"},
		"singleton":  {check{verdict: waiting, kind: Singleton, culprit: running}, time.Hour, "waits for job jrun of the same user and name (singleton) to end; it is running"},
		"never":      {check{verdict: never, kind: AfterOK, culprit: failed, since: at}, 24 * time.Hour, "afterok on job jfail can never be met: it failed; the job will be canceled at 2026-11-24 09:00:00 UTC (--dependency-timeout 24h)"},
		"never 90m":  {check{verdict: never, kind: AfterOK, culprit: failed, since: at}, 90 * time.Minute, "afterok on job jfail can never be met: it failed; the job will be canceled at 2026-11-23 10:30:00 UTC (--dependency-timeout 1h30m)"},
		"never 0":    {check{verdict: never, kind: AfterOK, culprit: failed, since: at}, 0, "afterok on job jfail can never be met: it failed; the job will be canceled at the next scheduling cycle (--dependency-timeout 0s)"},
	}
	for name, c := range cases {
		if got := c.c.message(c.timeout); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

// TestPositionHeld: GET /queue lists held jobs after the others, in the
// order they were queued, and numbers them on.
func TestPositionHeld(t *testing.T) {
	rows := []api.QueuedJob{
		{ID: "jheld2", QueuePosition: 0, PendingReason: api.ReasonDependency, QueuedAt: t0.Add(time.Minute)},
		{ID: "jfree2", QueuePosition: 2},
		{ID: "jheld1", QueuePosition: 0, PendingReason: api.ReasonDependencyNeverSatisfied, QueuedAt: t0},
		{ID: "jfree1", QueuePosition: 1},
	}
	PositionHeld(rows)
	var got []string
	for i, r := range rows {
		if r.QueuePosition != i+1 {
			t.Errorf("%s at %d has position %d", r.ID, i, r.QueuePosition)
		}
		got = append(got, r.ID)
	}
	if !slices.Equal(got, []string{"jfree1", "jfree2", "jheld1", "jheld2"}) {
		t.Fatalf("order %v", got)
	}
}
