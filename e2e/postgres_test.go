package e2e

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store/storetest"
)

// TestPostgresStore runs `corral up --store postgres://…`: the state lives
// in PostgreSQL (no corral.db in the data dir), and a server started again
// after a kill -9 has every acknowledged job.
func TestPostgresStore(t *testing.T) {
	dsn := storetest.Postgres(t) // skips without CORRAL_TEST_POSTGRES
	dir := t.TempDir()
	up := func() *server {
		return startControl(t, dir, freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "e2e-node", "--store", dsn)
	}
	s := up()
	done := s.submit(map[string]any{"command": "echo hi", "gpu_count": 1, "name": "done"})
	s.waitState(done.ID, api.StateCompleted, 30*time.Second)

	// Acknowledged submissions, in parallel (group commits), then kill -9.
	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = s.submit(map[string]any{"command": "sleep 600", "gpu_count": 8}).ID
		}()
	}
	wg.Wait()
	s.kill9()
	if fileExists(filepath.Join(dir, "corral.db")) {
		t.Fatal("corral.db was made in the data dir: the state is not (only) in PostgreSQL")
	}

	s2 := up()
	got := s2.job(done.ID)
	if got.State != api.StateCompleted || got.Name != "done" || len(got.Events) < 3 {
		t.Fatalf("after restart, job %s = %s with %d events", done.ID, got.State, len(got.Events))
	}
	for _, id := range ids {
		if j := s2.job(id); j.ID != id {
			t.Errorf("acknowledged job %s lost", id)
		}
	}
}

// TestStoreFlagRejectsUnknownScheme: a --store that is neither sqlite://
// nor postgres:// is refused before anything starts, naming the flag.
func TestStoreFlagRejectsUnknownScheme(t *testing.T) {
	_, stderr, code := runCLI(t, nil, "server", "--data-dir", t.TempDir(), "--store", "mysql://x")
	if code == 0 || !strings.Contains(stderr, "--store") {
		t.Fatalf("exit %d, stderr %q: want a failure naming --store", code, stderr)
	}
}

// TestStoreMigrate: a `corral up` on SQLite is stopped, `corral store
// migrate` copies its store into PostgreSQL, and `corral up --store
// postgres://…` serves the same jobs, events included; a second migrate
// into the now non-empty database is refused unless --force.
func TestStoreMigrate(t *testing.T) {
	dsn := storetest.Postgres(t)
	dir := t.TempDir()
	s := startControl(t, dir, freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "e2e-node")
	var ids []string
	for i := range 3 {
		j := s.submit(map[string]any{"command": "echo hi", "gpu_count": 1, "name": "m" + strings.Repeat("x", i)})
		s.waitState(j.ID, api.StateCompleted, 30*time.Second)
		ids = append(ids, j.ID)
	}
	before := map[string]api.Job{}
	for _, id := range ids {
		before[id] = s.job(id)
	}
	s.stop()

	from := "sqlite://" + filepath.Join(dir, "corral.db")
	stdout, stderr, code := runCLI(t, nil, "store", "migrate", "--from", from, "--to", dsn)
	if code != 0 || !strings.Contains(stdout, "copied") || !strings.Contains(stderr, "jobs: ") {
		t.Fatalf("migrate: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if _, stderr, code := runCLI(t, nil, "store", "migrate", "--from", from, "--to", dsn); code == 0 || !strings.Contains(stderr, "--force") {
		t.Fatalf("second migrate: exit %d, stderr %q: want a refusal naming --force", code, stderr)
	}
	if _, stderr, code := runCLI(t, nil, "store", "migrate", "--from", from, "--to", dsn, "--force"); code != 0 {
		t.Fatalf("forced migrate: exit %d, stderr %q", code, stderr)
	}

	s2 := startControl(t, dir, freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "e2e-node", "--store", dsn)
	for id, want := range before {
		got := s2.job(id)
		if got.ID != id || got.Name != want.Name || got.Command != want.Command || len(got.Events) < len(want.Events) {
			t.Errorf("job %s after migrate = %s %q with %d events; before %s %q with %d", id, got.State, got.Name, len(got.Events), want.State, want.Name, len(want.Events))
		}
		if want.State == api.StateCompleted && got.State != api.StateCompleted {
			t.Errorf("job %s was completed, is %s", id, got.State)
		}
	}
}

// TestPostgresTakeOver: a control plane (`corral up` here; `corral server`
// the same) on PostgreSQL leads through the
// leader lease; when it is killed (-9), a second server on another data
// dir, started at once, waits as a standby until the dead leader's lease
// expires, then leads with every acknowledged job.
func TestPostgresTakeOver(t *testing.T) {
	dsn := storetest.Postgres(t)
	a := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "node-a", "--store", dsn)
	var ids []string
	for range 5 {
		ids = append(ids, a.submit(map[string]any{"command": "sleep 600", "gpu_count": 1}).ID)
	}
	a.kill9()
	b := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "node-b", "--store", dsn)
	if out := b.out.String(); !strings.Contains(out, "standby") || !strings.Contains(out, "leading") {
		t.Errorf("the second server did not wait for the lease, then lead; output:\n%s", out)
	}
	for i, id := range ids {
		if j := b.job(id); j.ID != id || j.Number != int64(i+1) {
			t.Errorf("acknowledged job %s (number %d) lost in the take-over, or its number: %d", id, i+1, j.Number)
		}
	}
	// Numbers go on after the take-over, never given twice.
	if j := b.submit(map[string]any{"command": "sleep 600", "gpu_count": 1}); j.Number != 6 {
		t.Errorf("the first job after the take-over: number %d; want 6", j.Number)
	}
}
