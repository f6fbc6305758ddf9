package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// TestReportWaiting: while corral run's job is queued it prints the job's
// place in the queue and why it waits (alloc's line), once per change,
// and stops when the job leaves the queue.
func TestReportWaiting(t *testing.T) {
	answers := []api.Job{
		{ID: "J", Priority: api.PriorityNormal, State: api.StateQueued, QueuePosition: 3, PendingMessage: "waiting for 2 free GPUs"},
		{ID: "J", Priority: api.PriorityNormal, State: api.StateQueued, QueuePosition: 3, PendingMessage: "waiting for 2 free GPUs"},
		{ID: "J", Priority: api.PriorityNormal, State: api.StateQueued, QueuePosition: 1, PendingMessage: "waiting for 1 free GPU"},
		{ID: "J", Priority: api.PriorityNormal, State: api.StateRunning},
	}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(answers)-1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answers[i])
	}))
	t.Cleanup(srv.Close)
	var errb bytes.Buffer
	c := &cli{stderr: &errb}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.reportWaiting(ctx, client.New(srv.URL), api.Job{ID: "J", Priority: api.PriorityNormal, State: api.StateQueued, QueuePosition: 4}, 0)
	want := "corral: job J queued, position 4\n" +
		"corral: job J queued, position 3: waiting for 2 free GPUs\n" +
		"corral: job J queued, position 1: waiting for 1 free GPU\n"
	if errb.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", errb.String(), want)
	}
}
