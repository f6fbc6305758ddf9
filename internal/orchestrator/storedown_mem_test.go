package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// TestStoreDownThenBack: while the store cannot write, the submission in
// the failing batch is told its outcome is unknown, a new one is refused
// with 503 and changes nothing, and reads go on; once the store writes
// again, the kept batch is committed and the first submission, retried
// under its idempotency key, finds its job.
func TestStoreDownThenBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st := memstore.New()
	o, err := New(ctx, Config{Store: st, Executor: newFakeExec(), Nodes: []Node{simNode("n1", 8)}, DataDir: t.TempDir(), Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}

	st.FailCommits(errors.New("no space left on device"))
	req := api.SubmitRequest{Command: "true", GPUCount: gpus(1)}
	_, _, err = o.Submit(ctx, req, "k1")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != "store_unavailable" {
		t.Fatalf("submission in the failing batch: %v, want 503 store_unavailable", err)
	}
	if _, _, err := o.Submit(ctx, req, "k2"); !errors.As(err, &ae) || ae.Code != "store_unavailable" {
		t.Fatalf("submission while the store is down: %v, want 503 store_unavailable", err)
	}
	if n := len(o.Queue().QueuedJobs); n != 1 {
		t.Fatalf("queue while the store is down: %d jobs, want the first one only (made in memory)", n)
	}

	st.FailCommits(nil)
	for deadline := time.After(10 * time.Second); o.storeDownError() != nil; {
		changed := o.Changed()
		if o.storeDownError() == nil {
			break
		}
		select {
		case <-changed: // a commit: the kept batch, once the store writes
		case <-deadline:
			t.Fatal("the kept batch was not committed once the store could write")
		}
	}
	j, replayed, err := o.Submit(ctx, req, "k1")
	if err != nil || !replayed {
		t.Fatalf("retry under k1: replayed %v, %v; want the first job", replayed, err)
	}
	if stored, err := st.Job(ctx, j.ID); err != nil || stored.State != api.StateQueued {
		t.Fatalf("stored job %s: %+v, %v", j.ID, stored, err)
	}
	if n := len(o.Queue().QueuedJobs); n != 1 {
		t.Fatalf("queue: %d jobs, want 1 (the refused submission changed nothing)", n)
	}
}
