package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Concurrent commits are grouped; one that breaks a constraint fails alone
// and leaves nothing behind, and every other one is there after a reopen.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	var first Batch
	submission(&first, 0, at) // key ana/key-0
	if err := s.Commit(ctx, &first); err != nil {
		t.Fatal(err)
	}
	const writers = 50
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := 1; i <= writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b Batch
			submission(&b, i, at)
			if i%10 == 0 {
				// The key of job 0: the whole batch must fail, job row included.
				b.Idempotency = map[string]string{"ana/key-0": b.Jobs[0].ID}
			}
			errs[i-1] = s.Commit(ctx, &b)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != ((i+1)%10 == 0) {
			t.Errorf("commit %d: %v", i+1, err)
		}
	}
	s.Close()
	if err := s.Commit(ctx, &first); !errors.Is(err, ErrClosed) {
		t.Errorf("commit after Close: %v, want ErrClosed", err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, j := range st.Jobs {
		got[j.ID] = true
		if len(j.Events) != 1 {
			t.Errorf("job %s has %d events", j.ID, len(j.Events))
		}
	}
	for i := 0; i <= writers; i++ {
		id := fmt.Sprintf("j%020d", i)
		if want := i%10 != 0 || i == 0; got[id] != want {
			t.Errorf("job %d stored: %v, want %v", i, got[id], want)
		}
	}
	if len(st.Idempotency) != writers-writers/10+1 {
		t.Errorf("%d idempotency keys", len(st.Idempotency))
	}
}

// A caller that gives up before its write is queued writes nothing.
func TestCommitCanceledBeforeQueued(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b Batch
	submission(&b, 1, time.Now())
	if err := s.Commit(ctx, &b); !errors.Is(err, context.Canceled) {
		// It may also have been queued and skipped by the committer:
		// either way nothing is written and the caller learns why.
		t.Fatalf("commit with a canceled context: %v", err)
	}
	st, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 0 {
		t.Errorf("%d jobs written by a canceled commit", len(st.Jobs))
	}
}
