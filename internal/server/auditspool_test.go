package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/store"
)

// logBuffer is a log sink safe for the server's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) lines(match ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range strings.Split(l.b.String(), "\n") {
		for _, m := range match {
			if !strings.Contains(line, m) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// TestAuditSpool: while the store cannot write, entries wait in memory
// (one warning, no write tried per entry once some wait), and are
// written in order once it can; past maxSpooled they are dropped and
// counted.
func TestAuditSpool(t *testing.T) {
	var full atomic.Bool
	var tries atomic.Int64
	var mu sync.Mutex
	var written []string
	logs := &logBuffer{}
	sp := &auditSpool{log: slog.New(slog.NewTextHandler(logs, nil)), first: time.Millisecond,
		write: func(_ context.Context, es ...api.AuditEntry) error {
			tries.Add(1)
			if full.Load() {
				return errors.New("database or disk is full")
			}
			mu.Lock()
			defer mu.Unlock()
			for _, e := range es {
				written = append(written, e.RequestID)
			}
			return nil
		}}
	ctx := context.Background()
	sp.record(ctx, api.AuditEntry{RequestID: "r0"})
	full.Store(true)
	for _, id := range []string{"r1", "r2", "r3"} {
		sp.record(ctx, api.AuditEntry{RequestID: id})
	}
	if n := len(logs.lines("level=WARN", "audit:")); n != 1 {
		t.Errorf("%d warnings while the store cannot write, want 1:\n%s", n, logs.b.String())
	}
	if n := len(logs.lines("level=ERROR")); n != 0 {
		t.Errorf("%d errors logged", n)
	}
	full.Store(false)
	select {
	case <-sp.drained():
	case <-time.After(waitBound):
		t.Fatalf("the waiting entries were not written within %s", waitBound)
	}
	mu.Lock()
	got := strings.Join(written, " ")
	mu.Unlock()
	if got != "r0 r1 r2 r3" {
		t.Fatalf("written %q, want r0 r1 r2 r3 in order", got)
	}
	// Once written, a new entry is written at once again.
	before := tries.Load()
	sp.record(ctx, api.AuditEntry{RequestID: "r4"})
	if tries.Load() != before+1 || len(written) != 5 {
		t.Fatalf("an entry after the store came back: %d tries, written %v", tries.Load()-before, written)
	}
}

// TestFullDiskRefusalsAudited: with the store on a small tmpfs filled to
// the last byte, changes are refused 503 store_unavailable; each refusal
// logs one warning line (no error lines), and is in the audit trail once
// the store writes again. Runs only as root (it mounts).
func TestFullDiskRefusalsAudited(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(dir, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })

	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	src := gpu.NewSimulated("n1", gpu.SimSpec{Count: 1, Model: "H100", MemoryGB: 80})
	devs, _ := src.Devices(ctx)
	o, err := orchestrator.New(ctx, orchestrator.Config{Store: st, Executor: idleExec{}, DataDir: t.TempDir(), Logger: logger,
		Nodes: []orchestrator.Node{{ID: "n1", Devices: devs, Telemetry: src, Simulated: true}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Bootstrap(ctx, testAdminToken, "root"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	srv := New(o, logger, WithAuth(a))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, ts.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}

	// Fill the disk (shrink the tmpfs to what it holds), then submit
	// until the store cannot write.
	resize := func(size string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
			t.Fatalf("resize the tmpfs to %s: %v %s", size, err, out)
		}
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	resize(fmt.Sprint((fs.Blocks - fs.Bfree + 1) * uint64(fs.Bsize)))
	pad := strings.Repeat("x", 8<<10)
	refused := 0
	for i := 0; i < 2000 && refused < 5; i++ {
		status, b := call("POST", "/queue/submit", map[string]any{"command": "true", "gpu_count": 0, "env": map[string]string{"PAD": pad}})
		switch {
		case status == http.StatusCreated:
		case status == http.StatusServiceUnavailable && strings.Contains(string(b), storeUnavailable):
			refused++
		default:
			t.Fatalf("a submit on a full disk: %d %s", status, b)
		}
	}
	if refused == 0 {
		t.Fatalf("2000 submits on a full disk were all taken")
	}

	// Room again: the store writes again, and the refusals are audited.
	resize("16m")
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, b := call("POST", "/queue/submit", map[string]any{"command": "true", "gpu_count": 0})
		if status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no submit taken 30s after the disk had room: %d %s", status, b)
		}
		time.Sleep(100 * time.Millisecond) // a real disk's recovery: the orchestrator's retry pauses
	}
	select {
	case <-srv.audits.drained():
	case <-time.After(30 * time.Second):
		t.Fatalf("the kept audit entries were not written 30s after the disk had room")
	}
	status, b := call("GET", "/audit?action=job.submit&limit=1000", nil)
	var list api.AuditList
	if status != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("GET /audit: %d %s", status, b)
	}
	audited := 0
	for _, e := range list.Entries {
		if e.Status == http.StatusServiceUnavailable && e.Error == storeUnavailable {
			audited++
		}
	}
	if audited < refused {
		t.Errorf("%d refusals during the full disk are in the audit trail, want %d", audited, refused)
	}

	// One line per refusal, a warning; no error line per refusal.
	if errs := logs.lines("level=ERROR", "request failed"); len(errs) > 0 {
		t.Errorf("%d refusals logged %d \"request failed\" errors, e.g. %s", refused, len(errs), errs[0])
	}
	if errs := logs.lines("level=ERROR", "audit"); len(errs) > 0 {
		t.Errorf("%d refusals logged %d audit errors, e.g. %s", refused, len(errs), errs[0])
	}
	if warns := logs.lines("level=WARN", "msg=request", storeUnavailable); len(warns) < refused {
		t.Errorf("%d refusals logged %d warnings, want one each", refused, len(warns))
	}
}
