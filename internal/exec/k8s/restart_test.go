package k8s_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/exectest"
	"github.com/corral-sched/corral/internal/exec/k8s"
)

// book records the node news the executor sends; down is signalled on
// every NodeDown.
type book struct {
	mu   sync.Mutex
	regs map[string]api.AgentRegistration
	down chan string
}

func newBook() *book {
	return &book{regs: map[string]api.AgentRegistration{}, down: make(chan string, 100)}
}

func (b *book) RegisterNode(_ context.Context, r api.AgentRegistration, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.regs[r.NodeID] = r
	return nil
}
func (b *book) NodeSeen(string, []api.GPUReading, []api.ForeignProcess, time.Time) {}
func (b *book) NodeDown(id string, _ time.Time)                                    { b.down <- id }

// waitUpdate waits for the attempt's update of kind.
func waitUpdate(t *testing.T, u *exectest.Updates, job string, kind exec.UpdateKind) exec.Update {
	t.Helper()
	var got exec.Update
	ok := u.Wait(job, 0, 60*time.Second, func(us []exec.Update) bool {
		for _, x := range us {
			if x.Kind == kind {
				got = x
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("job %s: no %s update within 60s", job, kind)
	}
	return got
}

func task(t *testing.T, job, cmd string, nodes int) exec.Task {
	ranks, _ := place(nodes, 1)
	tk := exec.Task{JobID: job, Command: cmd, Ranks: ranks, LogPath: filepath.Join(t.TempDir(), "0.log")}
	tk.NodeID = ranks[0].NodeID
	return tk
}

// TestAPIServerRestart stops kube-apiserver while an attempt runs: the
// breaker opens and the nodes go down; the attempt ends meanwhile and one
// more is started; once the server is back, the watch resumes and both
// attempts end with their own exit codes and logs.
func TestAPIServerRestart(t *testing.T) {
	v := newEnv(t)
	ns := v.namespace(t)
	u := exectest.NewUpdates()
	b := newBook()
	ex, err := k8s.New(k8s.Config{Client: v.c.Client, Address: v.c.URL, Sink: u.Sink, Book: b, Namespace: ns, Image: "busybox",
		Heartbeat: 100 * time.Millisecond, Breaker: breaker.Config{Threshold: 1, Reset: 200 * time.Millisecond, MaxReset: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ex.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if !ex.WaitSynced(ctx) {
		t.Fatal("not synced")
	}
	gate := filepath.Join(t.TempDir(), "go")
	first := task(t, "before", `echo before; while [ ! -f `+gate+` ]; do sleep 0.1; done; echo after; exit 7`, 1)
	if err := ex.Start(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitUpdate(t, u, "before", exec.Started)

	v.c.StopAPIServer(t)
	select {
	case <-b.down:
	case <-time.After(30 * time.Second):
		t.Fatalf("no node went down with the API server away; health %+v", ex.Health())
	}
	if h := ex.Health()[0]; h.Breaker == string(breaker.Closed) {
		t.Errorf("health %+v: want the breaker open", h)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil { // the first attempt ends while the server is away
		t.Fatal(err)
	}
	second := task(t, "during", `echo during`, 1)
	if err := ex.Start(ctx, second); err != nil {
		t.Fatalf("Start while the API server is away: %v (want it queued for later)", err)
	}

	v.c.StartAPIServer(t)
	if x := waitUpdate(t, u, "before", exec.Exited); x.ExitCode != 7 || x.Lost != "" {
		t.Errorf("first attempt: %+v, want exit 7", x)
	}
	if x := waitUpdate(t, u, "during", exec.Exited); x.ExitCode != 0 || x.Err != nil {
		t.Errorf("second attempt: %+v, want exit 0", x)
	}
	for tk, want := range map[*exec.Task]string{&first: "before\nafter\n", &second: "during\n"} {
		if b, _ := os.ReadFile(tk.LogPath); string(b) != want {
			t.Errorf("job %s log %q, want %q (each line once)", tk.JobID, b, want)
		}
	}
	if h := ex.Health()[0]; h.Breaker != string(breaker.Closed) || h.Nodes != 2 {
		t.Errorf("health %+v: want closed with 2 nodes", h)
	}
}

// TestGangRankFailure: a rank that fails stops the rest of the gang, and
// the attempt ends with the failure's exit code; Settled removes the pods.
func TestGangRankFailure(t *testing.T) {
	v := newEnv(t)
	ns := v.namespace(t)
	u := exectest.NewUpdates()
	ex := v.executor(t, ns, u.Sink, nil)
	up := filepath.Join(t.TempDir(), "rank0-up") // rank 1 fails once rank 0 runs its trap
	tk := task(t, "gangfail", `if [ "$CORRAL_NODE_RANK" = 1 ]; then while [ ! -f `+up+` ]; do sleep 0.05; done; exit 3; fi
trap 'echo rank0 TERM; exit 0' TERM; echo up; touch `+up+`; sleep 300 & wait`, 2)
	ctx := context.Background()
	if err := ex.Start(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if x := waitUpdate(t, u, "gangfail", exec.Exited); x.ExitCode != 3 {
		t.Errorf("Exited %+v: want rank 1's exit 3", x)
	}
	if b, _ := os.ReadFile(tk.LogPath); !strings.Contains(string(b), "rank0 TERM") {
		t.Errorf("rank 0's log %q: want it stopped with SIGTERM", b)
	}
	ex.Settled("gangfail", 0)
	w, err := v.c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "corral.dev/job-id=gangfail"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for deadline := time.After(30 * time.Second); ; {
		l, err := v.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "corral.dev/job-id=gangfail"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			break
		}
		select {
		case <-w.ResultChan():
		case <-deadline:
			t.Fatalf("%d pods left after Settled", len(l.Items))
		}
	}
}

// TestNodesFromTheAPI: Ready nodes with GPUs are registered with GPU
// Feature Discovery's model; a cordoned or not-Ready node goes down.
func TestNodesFromTheAPI(t *testing.T) {
	v := newEnv(t)
	b := newBook()
	ex := v.executor(t, v.namespace(t), func(exec.Update) {}, b)
	b.mu.Lock()
	reg, ok := b.regs["k8s-gpu-a"]
	b.mu.Unlock()
	if !ok || len(reg.GPUs) != 2 || reg.GPUs[0].Model != "NVIDIA-H100-80GB-HBM3" || reg.GPUs[0].MemoryMiB != 81559 || reg.Labels["pool"] != "k8s" {
		t.Fatalf("registration of gpu-a: %+v (found %v)", reg, ok)
	}
	ctx := context.Background()
	if err := v.kl.SetReady(ctx, "gpu-b", false); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-b.down:
		if id != "k8s-gpu-b" {
			t.Errorf("%s went down, want k8s-gpu-b", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the not-Ready node did not go down")
	}
	if err := ex.Start(ctx, task(t, "onb", "true", 2)); err == nil {
		t.Error("Start on a not-Ready node: want an error")
	}
}

// TestNodeDeleted: a node that leaves the cluster ends the attempts on it
// as node_lost, and goes down.
func TestNodeDeleted(t *testing.T) {
	v := newEnv(t)
	u := exectest.NewUpdates()
	b := newBook()
	ex := v.executor(t, v.namespace(t), u.Sink, b)
	tk := task(t, "onlost", `echo up; sleep 300`, 1)
	ctx := context.Background()
	if err := ex.Start(ctx, tk); err != nil {
		t.Fatal(err)
	}
	waitUpdate(t, u, "onlost", exec.Started)
	if err := v.c.Client.CoreV1().Nodes().Delete(ctx, "gpu-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if x := waitUpdate(t, u, "onlost", exec.Exited); x.Lost != api.ReasonNodeLost || x.Err == nil {
		t.Errorf("Exited %+v: want node_lost", x)
	}
	select {
	case id := <-b.down:
		if id != "k8s-gpu-a" {
			t.Errorf("%s went down, want k8s-gpu-a", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the deleted node did not go down")
	}
}
