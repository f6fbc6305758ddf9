package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corral-sched/corral/internal/api"
)

// TestLearnedEstimates runs three short jobs of one name on the real
// binary, then fills the GPUs with a long job that gave its estimate and
// queues two more of the name behind it: the queue (corral queue -o json,
// corral show, the dashboard) gives their starts as ranges with the basis
// "from 3 runs of sweep by alice", and corral show --what-if-gpus answers
// for another GPU count without changing anything.
func TestLearnedEstimates(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8:H100:80", "--node-name", "learn-node")
	env := []string{"CORRAL_SERVER=" + s.URL}
	for _, secs := range []string{"1", "2", "4"} {
		j := s.submit(map[string]any{"name": "sweep", "user": "alice", "gpu_count": 2, "command": "sleep " + secs})
		s.waitState(j.ID, api.StateCompleted, 60*time.Second)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	blocker := s.submit(map[string]any{"name": "long", "user": "bob", "gpu_count": 8, "estimated_duration": "1h",
		"command": "while [ ! -e " + shellQuote(gate) + " ]; do sleep 0.1; done"})
	s.waitState(blocker.ID, api.StateRunning, 30*time.Second)
	first := s.submit(map[string]any{"name": "sweep", "user": "alice", "gpu_count": 8, "command": "sleep 1"})
	second := s.submit(map[string]any{"name": "sweep", "user": "alice", "gpu_count": 8, "command": "sleep 1"})
	const basis = "from 3 runs of sweep by alice"

	// corral queue -o json: the second waits for the first, whose learned
	// run time (1 to 4 s) makes its start a range.
	var row api.QueuedJob
	waitFor(t, 30*time.Second, func() string { return "no range for " + second.ID + " in corral queue -o json" }, func() bool {
		out, errOut, code := runCLI(t, env, "queue", "-A", "--state", "queued", "-o", "json")
		if code != 0 {
			t.Fatalf("corral queue: exit %d: %s", code, errOut)
		}
		var q api.QueueResponse
		if err := json.Unmarshal([]byte(out), &q); err != nil {
			t.Fatalf("corral queue -o json: %v\n%s", err, out)
		}
		for _, r := range q.QueuedJobs {
			if r.ID == second.ID {
				row = r
			}
		}
		return row.EstimatedStartLow != nil && row.EstimatedStartHigh != nil && row.EstimatedStartHigh.After(*row.EstimatedStartLow)
	})
	if row.EstimateBasis != basis {
		t.Errorf("basis %q; want %q", row.EstimateBasis, basis)
	}
	if !row.EstimatedStartLow.After(time.Now().Add(50*time.Minute)) || row.EstimatedStartHigh.Sub(*row.EstimatedStartLow) > 10*time.Second {
		t.Errorf("range %v to %v; want after the 1-hour job, a few seconds wide", row.EstimatedStartLow, row.EstimatedStartHigh)
	}

	// corral show: the range and the basis.
	out, errOut, code := runCLI(t, env, "show", second.ID)
	// The range is a few seconds wide: both ends fall in one minute, so it
	// shows as one time (TestFmtEstStart has the wider ones).
	if code != 0 || !strings.Contains(out, "Estimate basis:") || !strings.Contains(out, basis) || !strings.Contains(out, "Est. start:      in ") {
		t.Errorf("corral show: exit %d: %s%s; want the start and the basis", code, out, errOut)
	}

	// What if the first asked for 4 GPUs? It still waits for the 8-GPU job.
	out, errOut, code = runCLI(t, env, "show", first.ID, "--what-if-gpus", "4", "-o", "json")
	var w api.WhatIf
	if err := json.Unmarshal([]byte(out), &w); code != 0 || err != nil {
		t.Fatalf("corral show --what-if-gpus 4: exit %d, %v: %s%s", code, err, out, errErr(errOut))
	}
	if w.GPUs != 4 || w.CurrentGPUs != 8 || w.StartsNow || w.EstimatedStartTime == nil || w.EstimateBasis != basis {
		t.Errorf("what-if = %+v; want a later start with 4 GPUs and the basis", w)
	}
	if out, errOut, code = runCLI(t, env, "show", first.ID, "--what-if-gpus", "4"); code != 0 || !strings.Contains(out, "Would start:") {
		t.Errorf("corral show --what-if-gpus 4: exit %d: %s%s", code, out, errOut)
	}
	if _, errOut, code = runCLI(t, env, "show", first.ID, "--what-if-gpus", "16"); code == 0 || !strings.Contains(errOut, "gpus") {
		t.Errorf("--what-if-gpus 16 on 8 GPUs: exit %d: %s; want an error naming gpus", code, errOut)
	}
	if j := s.job(first.ID); j.GPUCount != 8 || j.State != api.StateQueued {
		t.Errorf("after what-if: %d GPUs, %s; want it unchanged", j.GPUCount, j.State)
	}

	// The dashboard's queue shows the range and the basis.
	t.Run("dashboard", func(t *testing.T) {
		ctx := browser(t)
		cell := `[data-role=queued] tr[data-job="` + second.ID + `"]`
		err := chromedp.Do(ctx,
			chromedp.Navigate(s.URL+"/?token="+adminToken+"#/queue"),
			chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
			chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
			chromedp.WaitVisible(chromedp.CSS(cell+` [data-role=est-basis]`)),
		)
		if err != nil {
			t.Fatalf("queue page: %v", err)
		}
		rng, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(cell+` [data-role=est-range]`)))
		if err != nil {
			t.Fatal(err)
		}
		why, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(cell+` [data-role=est-basis]`)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rng, " to ") || why != basis {
			t.Errorf("dashboard: range %q, basis %q; want \"HH:MM to HH:MM\" and %q", rng, why, basis)
		}
	})
}

// errErr labels a command's standard error in a failure message.
func errErr(s string) string {
	if s == "" {
		return ""
	}
	return "\nstderr: " + s
}
