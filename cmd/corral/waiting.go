package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// queuedLine says where a queued job stands, as corral alloc and corral run
// print it while they wait: "queued, position 3: waiting for 2 free GPUs".
func queuedLine(j api.Job) string {
	line := "queued"
	if j.QueuePosition > 0 {
		line += ", position " + strconv.Itoa(j.QueuePosition)
	}
	if j.PendingMessage != "" {
		line += ": " + j.PendingMessage
	}
	return line
}

// reportWaiting prints, on stderr, job id's place in the queue and why it
// waits, each time that changes, looking every poll until the job leaves
// the queue or ctx ends (corral run: its output has not begun). A failed
// look is not fatal: the output's follower reports the server's troubles.
func (c *cli) reportWaiting(ctx context.Context, cl *client.Client, j api.Job, poll time.Duration) {
	last := ""
	for j.State == api.StateQueued {
		if line := queuedLine(j); line != last {
			fmt.Fprintf(c.stderr, "corral: job %s %s\n", j.ID, line)
			last = line
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next, err := cl.Job(ctx, j.ID)
		if err == nil {
			j = next
		}
	}
}
