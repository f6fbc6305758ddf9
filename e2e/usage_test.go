package e2e

import (
	"database/sql"
	"encoding/csv"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // reads the heartbeat the server commits

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// aliveAt reads the server's last committed heartbeat (the setting
// alive_at) from its database, read-only; zero when there is none.
func aliveAt(t *testing.T, dataDir string) time.Time {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "corral.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow(`SELECT value FROM settings WHERE key = 'alive_at'`).Scan(&v); err != nil {
		return time.Time{}
	}
	at, _ := time.Parse(time.RFC3339Nano, v)
	return at
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// TestUsageReportEqualsRuntimeTimesGPUs runs jobs that complete, fail and
// are canceled, and one that dies with the server (kill -9), then checks
// that the usage report's GPU-seconds equal GPUs x runtime summed over the
// jobs, the crash-lost attempt included (charged up to the server's last
// heartbeat, and once only), by user and by project, in JSON and CSV.
func TestUsageReportEqualsRuntimeTimesGPUs(t *testing.T) {
	dataDir, port := t.TempDir(), freePort(t)
	s := startServerAt(t, dataDir, port)
	model := s.cluster().Nodes[0].GPUType
	if _, errOut, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "price", "set", model, "2.5"); code != 0 {
		t.Fatalf("price set: exit %d: %s", code, errOut)
	}

	type spec struct {
		user, project, cmd string
		gpus               int
	}
	specs := []spec{
		{"ana", "vision", "sleep 1", 2},
		{"bo", "nlp", "sleep 0.5; exit 3", 1},
		{"ana", "nlp", "sleep 0.5", 3},
	}
	var ids []string
	for _, sp := range specs {
		j := s.submit(map[string]any{"command": sp.cmd, "gpu_count": sp.gpus, "user": sp.user, "project": sp.project})
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		s.waitTerminal(id, 30*time.Second)
	}
	// A canceled running job is charged up to its end too.
	canceled := s.submit(map[string]any{"command": "sleep 300", "gpu_count": 1, "user": "bo", "project": "vision"})
	s.waitState(canceled.ID, api.StateRunning, 30*time.Second)
	s.mustJSON("DELETE", "/queue/"+canceled.ID, nil, http.StatusAccepted, nil)
	s.waitTerminal(canceled.ID, 30*time.Second)
	ids = append(ids, canceled.ID)

	// One attempt dies with the server: wait for a heartbeat after it
	// started, then kill -9 the server and its jobs (the machine went
	// down: corral up's jobs outlive a server that alone dies).
	lost := s.submit(map[string]any{"command": "sleep 300", "gpu_count": 4, "user": "cy", "project": "vision", "max_retries": 0})
	running := s.waitState(lost.ID, api.StateRunning, 30*time.Second)
	waitFor(t, 30*time.Second, func() string { return "no heartbeat after the job started" }, func() bool {
		return aliveAt(t, dataDir).After(*running.StartedAt)
	})
	before := aliveAt(t, dataDir)
	s.kill9()
	crashJobs(dataDir)
	s = startServerAt(t, dataDir, port)
	lostJob := s.waitTerminal(lost.ID, 30*time.Second)
	if lostJob.Reason != api.ReasonLost {
		t.Fatalf("the job that died with the server: %s (%s)", lostJob.State, lostJob.Reason)
	}
	minLost := 4 * before.Sub(*running.StartedAt).Seconds()
	if lostJob.GPUSeconds < minLost-1e-6 {
		t.Fatalf("lost attempt charged %v GPU-seconds, want at least %v (4 GPUs up to the heartbeat)", lostJob.GPUSeconds, minLost)
	}
	ids = append(ids, lost.ID)

	// Expected: GPUs x runtime per job (the lost one: its charge up to
	// the heartbeat, which its job record carries).
	wantUser, wantProject := map[string]float64{}, map[string]float64{}
	var total float64
	for _, id := range ids {
		j := s.job(id)
		gs := j.GPUSeconds
		if id != lost.ID {
			if j.StartedAt == nil || j.FinishedAt == nil {
				t.Fatalf("job %s has no runtime: %+v", id, j)
			}
			rt := float64(len(j.Allocation)) * j.FinishedAt.Sub(*j.StartedAt).Seconds()
			if !closeTo(gs, rt) {
				t.Fatalf("job %s: gpu_seconds %v, GPUs x runtime %v", id, gs, rt)
			}
		}
		wantUser[j.User] += gs
		wantProject[j.Project] += gs
		total += gs
	}
	for by, want := range map[string]map[string]float64{"user": wantUser, "project": wantProject} {
		var rep usage.Report
		s.mustJSON("GET", "/usage?by="+by, nil, http.StatusOK, &rep)
		if len(rep.Rows) != len(want) || !closeTo(rep.Total.GPUSeconds, total) {
			t.Fatalf("by %s: %+v, want %v (total %v)", by, rep, want, total)
		}
		for _, r := range rep.Rows {
			if !closeTo(r.GPUSeconds, want[r.Key]) || !closeTo(r.Cost, r.GPUSeconds/3600*2.5) {
				t.Errorf("by %s, %s: %v GPU-seconds ($%v), want %v", by, r.Key, r.GPUSeconds, r.Cost, want[r.Key])
			}
		}
	}

	// The CLI's CSV: a header, one row per group, gpu_seconds beside
	// gpu_hours and cost.
	out, errOut, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "usage", "--by", "project", "--since", time.Now().Add(-24*time.Hour).Format("2006-01-02"), "--csv")
	if code != 0 {
		t.Fatalf("corral usage --csv: exit %d: %s", code, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 1+len(wantProject) {
		t.Fatalf("csv (%v):\n%s", err, out)
	}
	if got := strings.Join(recs[0], ","); got != "project,records,gpu_seconds,gpu_hours,used_gpu_seconds,used_gpu_hours,efficiency,cost" {
		t.Fatalf("csv header %q", got)
	}
	for _, r := range recs[1:] {
		gs, _ := strconv.ParseFloat(r[2], 64)
		if math.Abs(gs-wantProject[r[0]]) > 0.001 {
			t.Errorf("csv %s: %v GPU-seconds, want %v", r[0], gs, wantProject[r[0]])
		}
	}
	// The API's CSV is the same table.
	if r := s.do("GET", "/usage?by=project&format=csv", nil, nil); r.Status != http.StatusOK || !strings.HasPrefix(string(r.Body), "project,records,gpu_seconds,") ||
		!strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("format=csv: %s", r)
	}
	// A bad grouping is refused, naming the field.
	if r := s.do("GET", "/usage?by=color", nil, nil); r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != "by" {
		t.Fatalf("by=color: %s", r)
	}
	// The metrics carry the totals.
	r := s.do("GET", "/metrics", nil, nil)
	if !strings.Contains(string(r.Body), `corral_usage_gpu_seconds_total{project="vision",user="cy"}`) || !strings.Contains(string(r.Body), "corral_cost_dollars_total") {
		t.Fatalf("metrics lack the usage counters:\n%s", truncate(string(r.Body), 2000))
	}
}

// TestBudgetHoldAndRelease: a project's budget at 100% with action hold
// keeps the project's new jobs queued (budget_exhausted) while another
// project's run, until an admin releases it.
func TestBudgetHoldAndRelease(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	if _, errOut, code := runCLI(t, env, "budget", "set", "project", "vision", "--gpu-hours", "0.0001", "--action", "hold"); code != 0 {
		t.Fatalf("budget set: exit %d: %s", code, errOut)
	}
	if _, _, code := runCLI(t, env, "budget", "set", "project", "vision"); code == 0 {
		t.Fatal("a budget with no limit was accepted")
	}
	first := s.submit(map[string]any{"command": "sleep 1", "gpu_count": 1, "project": "vision"})
	s.waitTerminal(first.ID, 30*time.Second)
	var l usage.BudgetList
	s.mustJSON("GET", "/budgets", nil, http.StatusOK, &l)
	if len(l.Budgets) != 1 || !l.Budgets[0].Exhausted || l.Budgets[0].Notified != 100 {
		t.Fatalf("budgets after the first job: %+v", l.Budgets)
	}
	held := s.submit(map[string]any{"command": "true", "gpu_count": 1, "project": "vision"})
	other := s.submit(map[string]any{"command": "true", "gpu_count": 1, "project": "nlp"})
	s.waitState(other.ID, api.StateCompleted, 30*time.Second)
	s.waitJob(held.ID, 30*time.Second, "pending budget_exhausted", func(j api.Job) bool {
		return j.State == api.StateQueued && j.PendingReason == usage.ReasonBudgetExhausted
	})
	out, errOut, code := runCLI(t, env, "budget", "release", "project", "vision")
	if code != 0 || !strings.Contains(out, "released") {
		t.Fatalf("budget release: exit %d: %s%s", code, out, errOut)
	}
	s.waitState(held.ID, api.StateCompleted, 30*time.Second)
	out, _, _ = runCLI(t, env, "budget", "list")
	if !strings.Contains(out, "vision") || !strings.Contains(out, "exhausted, released") {
		t.Fatalf("budget list:\n%s", out)
	}
}
