package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corral-sched/corral/internal/api"
)

// TestArrayThrottle1000: a 1,000-task array throttled to 8 (corral submit
// --array 0-999%8) runs every task once with its CORRAL_ARRAY_* env right,
// never more than 8 at once (no moment is inside more than 8 tasks' runs,
// and the server never counts more than 8 active), shows as one row in
// corral queue, and runs more at once after corral array throttle raises
// the limit. The tasks ask no GPU, so the throttle, not the 8 simulated
// GPUs, is what bounds them. The overlap is checked on the runs' start and
// end times as the agent reported them.
func TestArrayThrottle1000(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	dir := t.TempDir()
	// Each task writes its env to a file of its own (printf is the
	// shell's: no process but the task's shell and its sleep).
	cmd := `printf '%s %s %s %s %s\n' "$CORRAL_ARRAY_JOB_ID" "$CORRAL_ARRAY_TASK_ID" "$CORRAL_ARRAY_TASK_COUNT" ` +
		`"$CORRAL_ARRAY_TASK_MIN" "$CORRAL_ARRAY_TASK_MAX" > "env.$CORRAL_ARRAY_TASK_ID"; sleep 0.05`
	stdout, stderr, code := runCLI(t, env, "-o", "json", "submit", "--array", "0-999%8", "--gpus", "0", "--name", "sweep",
		"--workdir", dir, "--", cmd)
	if code != 0 {
		t.Fatalf("corral submit --array: exit %d: %s", code, stderr)
	}
	var ans api.SubmitAnswer
	if err := json.Unmarshal([]byte(stdout), &ans); err != nil || ans.ArraySummary == nil {
		t.Fatalf("submit answer: %v: %s", err, truncate(stdout, 400))
	}
	aid := ans.ArraySummary.ID
	if ans.ArraySummary.TaskCount != 1000 || ans.ArraySummary.Throttle != 8 || ans.ID != aid+"_0" {
		t.Fatalf("submit answer: %+v (first task %s)", *ans.ArraySummary, ans.ID)
	}

	// One row in corral queue while tasks wait, with its counts.
	stdout, stderr, code = runCLI(t, env, "queue")
	if code != 0 {
		t.Fatalf("corral queue: exit %d: %s", code, stderr)
	}
	rows := 0
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, aid) {
			rows++
			if !strings.Contains(line, "[0-999%8]") || !strings.Contains(line, "queued,") {
				t.Errorf("the array's row has no counts: %q", line)
			}
		}
	}
	if rows != 1 {
		t.Fatalf("corral queue shows the array in %d rows, want 1:\n%s", rows, truncate(stdout, 2000))
	}

	// While it runs, the server never reports more than 8 active. Half
	// way, raise the throttle to 24 and see more than 8 run at once.
	var a api.Array
	raised := false
	sawMore := false
	waitFor(t, 120*time.Second, func() string { return fmt.Sprintf("array %s: %+v", aid, a.Counts) }, func() bool {
		s.mustJSON("GET", "/arrays/"+aid, nil, 200, &a)
		active := a.Counts.Active()
		switch {
		case !raised && active > 8:
			t.Fatalf("%d tasks active under a throttle of 8: %+v", active, a.Counts)
		case raised && active > 8:
			sawMore = true
		}
		if !raised && a.Counts.Completed >= 200 {
			if _, stderr, code := runCLI(t, env, "array", "throttle", aid[:12], "24"); code != 0 {
				t.Fatalf("corral array throttle: exit %d: %s", code, stderr)
			}
			raised = true
		}
		return a.Counts.Completed+a.Counts.Failed == 1000
	})
	if a.Counts.Completed != 1000 {
		t.Fatalf("counts at the end: %+v", a.Counts)
	}
	if !sawMore {
		t.Errorf("after the throttle went to 24, never more than 8 tasks were active at once")
	}

	// Every task ran once, with its env.
	for i := range 1000 {
		b, err := os.ReadFile(filepath.Join(dir, "env."+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("task %d left no record: %v", i, err)
		}
		want := []string{aid, strconv.Itoa(i), "1000", "0", "999"}
		if f := strings.Fields(string(b)); !slices.Equal(f, want) {
			t.Fatalf("task %d env %q, want %q", i, f, want)
		}
	}
	// No moment is inside more than 8 of the first 200 tasks' runs (from
	// each task's started_at to its finished_at, as its agent reported
	// them; all began before the raise: tasks start in index order).
	var list api.JobList
	s.mustJSON("GET", "/jobs?limit=5000", nil, 200, &list)
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, j := range list.Jobs {
		if j.ArrayJobID != aid || *j.ArrayTaskID >= 200 {
			continue
		}
		if j.StartedAt == nil || j.FinishedAt == nil {
			t.Fatalf("task %s has no start or end: %+v", j.ID, j)
		}
		edges = append(edges, edge{j.StartedAt.UnixNano(), 1}, edge{j.FinishedAt.UnixNano(), -1})
	}
	if len(edges) != 400 {
		t.Fatalf("GET /jobs listed %d of the first 200 tasks", len(edges)/2)
	}
	slices.SortFunc(edges, func(x, y edge) int {
		if x.at != y.at {
			return cmp.Compare(x.at, y.at)
		}
		return x.delta - y.delta // an end before a start at the same instant
	})
	depth, most := 0, 0
	for _, e := range edges {
		depth += e.delta
		most = max(most, depth)
	}
	t.Logf("at most %d of the first 200 tasks ran at once", most)
	if most > 8 {
		t.Fatalf("%d tasks ran at once under a throttle of 8", most)
	}
	if most < 2 {
		t.Errorf("at most %d task ran at once: the throttle of 8 was never used", most)
	}
}

// TestArrayCancelAndPatch: PATCH /arrays/{id} lowers and lifts the
// throttle; corral cancel ARRAYID --yes cancels every unfinished task,
// running ones included; a bad expression is refused naming array.
func TestArrayCancelAndPatch(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	var ans api.SubmitAnswer
	s.mustJSON("POST", "/queue/submit", map[string]any{"command": "sleep 600", "gpu_count": 1, "array": "0-49%2", "workdir": "/tmp"}, 201, &ans)
	aid := ans.ArraySummary.ID
	var a api.Array
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("%+v", a.Counts) }, func() bool {
		s.mustJSON("GET", "/arrays/"+aid, nil, 200, &a)
		return a.Counts.Running == 2
	})
	task := s.job(aid + "_40")
	if task.PendingReason != api.ReasonArrayThrottle {
		t.Errorf("task 40 waits with reason %q, want array_throttle", task.PendingReason)
	}
	s.mustJSON("PATCH", "/arrays/"+aid, map[string]any{"throttle": 5}, 200, &a)
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("%+v", a.Counts) }, func() bool {
		s.mustJSON("GET", "/arrays/"+aid, nil, 200, &a)
		return a.Counts.Running == 5
	})
	r := s.do("PATCH", "/arrays/"+aid, map[string]any{"throttle": -3}, nil)
	if e := errorBody(t, r); r.Status != 422 || e.Field != "throttle" {
		t.Errorf("throttle -3: %s", r)
	}

	stdout, stderr, code := runCLI(t, env, "cancel", aid)
	if code == 0 || !strings.Contains(stderr, "--yes") {
		t.Fatalf("cancel of 50 tasks without --yes: exit %d %q %q", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, env, "cancel", "--yes", "--grace", "1s", aid)
	if code != 0 || !strings.Contains(stdout, "canceled array "+aid) {
		t.Fatalf("corral cancel --yes ARRAYID: exit %d %q %q", code, stdout, stderr)
	}
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("%+v", a.Counts) }, func() bool {
		s.mustJSON("GET", "/arrays/"+aid, nil, 200, &a)
		return a.Counts.Canceled == 50
	})
	if a.State != api.StateCanceled {
		t.Errorf("array state %s, want canceled", a.State)
	}

	r = s.do("POST", "/queue/submit", map[string]any{"command": "true", "array": "0-99:0"}, nil)
	if e := errorBody(t, r); r.Status != 422 || e.Field != "array" {
		t.Errorf("step 0: %s", r)
	}
}

// TestArrayDashboard: the dashboard's queue and jobs pages show an array
// as one row with its counts, and a click on it lists its tasks (and, in
// the queue, another hides them).
func TestArrayDashboard(t *testing.T) {
	ctx := browser(t)
	s := startServer(t)
	// 8 tasks of 8 GPUs each, one at a time: 7 wait.
	var ans api.SubmitAnswer
	s.mustJSON("POST", "/queue/submit", map[string]any{"name": "sweep", "command": "sleep 60", "gpu_count": 8, "array": "0-7%1", "workdir": "/tmp"}, 201, &ans)
	aid := ans.ArraySummary.ID
	s.waitState(aid+"_0", api.StateRunning, 30*time.Second)
	rows := func() int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-role=queued] tr[data-job]').length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+adminToken+"#/queue"),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=queued] tr[data-array="`+aid+`"]`)),
	)
	if err != nil {
		t.Fatalf("queue page: %v", err)
	}
	counts, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-array="`+aid+`"] [data-role=array-counts]`)))
	if err != nil || !strings.Contains(counts, "7 queued, 1 running, 0 completed, 0 failed") {
		t.Fatalf("the array's row says %q (%v)", counts, err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d task rows before the array is opened, want 0", n)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr[data-array="`+aid+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=queued] tr[data-job="`+aid+`_7"]`)),
	)
	if err != nil {
		t.Fatalf("opening the array: %v", err)
	}
	if n := rows(); n != 7 {
		t.Fatalf("%d task rows once opened, want the 7 waiting", n)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr[data-array="`+aid+`"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() string { return "the tasks stayed listed" }, func() bool { return rows() == 0 })

	// The jobs page: the array is one row too, and opens to its 8 tasks.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=rows] tr[data-array="`+aid+`"]`)),
	)
	if err != nil {
		t.Fatalf("jobs page: %v", err)
	}
	counts, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-role=rows] tr[data-array="`+aid+`"] [data-role=array-counts]`)))
	if err != nil || !strings.Contains(counts, "7 queued, 1 running") {
		t.Fatalf("the jobs page's array row says %q (%v)", counts, err)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-role=rows] tr[data-array="`+aid+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=rows] tr[data-job="`+aid+`_0"]`)),
	)
	if err != nil {
		t.Fatalf("opening the array on the jobs page: %v", err)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-role=rows] tr[data-job]').length`))
	if err != nil || n != 8 {
		t.Fatalf("%d task rows on the jobs page once opened (%v), want 8", n, err)
	}
}
