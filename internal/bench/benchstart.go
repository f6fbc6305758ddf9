package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/cmdkit"
)

// benchPoll is how often bench start asks the server how far it got.
const benchPoll = 100 * time.Millisecond

// startResult is bench start's report. Times ending in _s are seconds from
// the moment the orchestrator was started.
type startResult struct {
	Server          string         `json:"server"`
	N               int            `json:"n"`
	Concurrency     int            `json:"concurrency"`
	GPUs            int            `json:"gpus"`
	Simulated       bool           `json:"simulated"`
	Submitted       int            `json:"submitted"`
	Errors          int            `json:"errors"`
	ErrorsByStatus  map[string]int `json:"errors_by_status"`
	SubmitWallS     float64        `json:"submit_wall_s"`
	SubmissionsPerS float64        `json:"submissions_per_s"`
	Started         int            `json:"started"`
	Completed       int            `json:"completed"`
	Failed          int            `json:"failed"` // ended otherwise: failed or canceled
	FirstStartS     float64        `json:"first_start_s"`
	LastStartS      float64        `json:"last_start_s"`
	LastFinishS     float64        `json:"last_finish_s"`
	StartsPerS      float64        `json:"starts_per_s"`
	CompletionsPerS float64        `json:"completions_per_s"`
	WallS           float64        `json:"wall_s"` // from the start until this tool saw every job ended
	// BaselineSpawnsPerS is the same-run baseline: bare fork, exec and
	// wait of /bin/sh -c true per second, GPUs at a time (benchbaseline.go).
	BaselineSpawnsPerS float64 `json:"baseline_spawns_per_s"`
}

// benchStart submits f.n jobs with scheduling stopped, starts it, and waits
// until they have all ended.
//  1. Check that there are GPUs, and stop the orchestrator.
//  2. Submit the jobs.
//  3. Start the orchestrator; poll its counts until the jobs seem done.
//  4. Read the jobs back and measure from their started_at and finished_at.
//  5. Leave the orchestrator as it was found.
func (c *cmds) benchStart(ctx context.Context, cl *client.Client, f *benchFlags) (*startResult, error) {
	// 1.
	cs, err := cl.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	if cs.TotalGPUs == 0 {
		return nil, fmt.Errorf("the server at %s has no GPUs up; start one with corral up --simulate-gpus 8", cl.BaseURL())
	}
	simulated := len(cs.Nodes) > 0
	for _, n := range cs.Nodes {
		simulated = simulated && n.Simulated
	}
	wasRunning, _, err := c.holdOrchestrator(ctx, cl, "bench start")
	if err != nil {
		return nil, err
	}
	defer func() {
		if !wasRunning {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if _, err := cl.StopOrchestrator(ctx); err != nil {
				fmt.Fprintf(c.Stderr, "corral: warning: the orchestrator could not be stopped again as it was: %s\n", c.Describe(err))
			}
		}
	}()
	before, err := cl.OrchestratorStatus(ctx)
	if err != nil {
		return nil, err
	}
	since := time.Now().Add(-time.Minute) // GET /jobs?since= has a one-second grain; margin for clocks

	// 2.
	run, err := c.submitAll(ctx, cl, f, "submit")
	if err != nil {
		if run != nil {
			c.cancelAll(context.WithoutCancel(ctx), cl, run.ids, f.concurrency)
		}
		return nil, err
	}
	mine := make(map[string]bool, run.ok())
	for _, id := range run.ids {
		if id != "" {
			mine[id] = true
		}
	}
	res := &startResult{Server: cl.BaseURL(), N: f.n, Concurrency: f.concurrency, GPUs: cs.TotalGPUs, Simulated: simulated,
		Submitted: run.ok(), Errors: run.failed(), ErrorsByStatus: run.errs,
		SubmitWallS: run.wall.Seconds(), SubmissionsPerS: rate(int64(run.ok()), run.wall)}

	// 3.
	t0 := time.Now()
	if _, err := cl.StartOrchestrator(ctx); err != nil {
		return nil, fmt.Errorf("starting the orchestrator: %w", err)
	}
	jobs, err := c.awaitJobs(ctx, cl, f, before, mine, since, t0)
	if err != nil {
		return nil, err
	}
	res.WallS = time.Since(t0).Seconds()
	res.BaselineSpawnsPerS = spawnBaseline(ctx, cs.TotalGPUs, time.Second) // benchbaseline.go

	// 4.
	var first, lastStart, lastEnd time.Time
	for _, j := range jobs {
		if j.StartedAt != nil {
			res.Started++
			if first.IsZero() || j.StartedAt.Before(first) {
				first = *j.StartedAt
			}
			if j.StartedAt.After(lastStart) {
				lastStart = *j.StartedAt
			}
		}
		if j.State == api.StateCompleted {
			res.Completed++
		} else {
			res.Failed++
		}
		if j.FinishedAt != nil && j.FinishedAt.After(lastEnd) {
			lastEnd = *j.FinishedAt
		}
	}
	since0 := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return t.Sub(t0).Seconds()
	}
	res.FirstStartS, res.LastStartS, res.LastFinishS = since0(first), since0(lastStart), since0(lastEnd)
	if res.LastStartS > 0 {
		res.StartsPerS = float64(res.Started) / res.LastStartS
	}
	if res.LastFinishS > 0 {
		res.CompletionsPerS = float64(res.Completed) / res.LastFinishS
	}
	return res, nil
}

// awaitJobs waits until every job in mine has ended, printing progress, and
// returns them. The server's counts tell when they seem done (the jobs
// queued before are left out); the job list confirms it.
func (c *cmds) awaitJobs(ctx context.Context, cl *client.Client, f *benchFlags, before api.OrchestratorStatus, mine map[string]bool, since, t0 time.Time) ([]api.Job, error) {
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	n := int64(len(mine))
	var started, running atomic.Int64
	stopProgress := c.progress(f.progress, func(elapsed time.Duration, prev, now int64) string {
		return fmt.Sprintf("start: %d/%d started, %d running, %.0f starts/s", now, n, running.Load(), rate(now-prev, elapsed))
	}, &started)
	defer stopProgress()
	tick := time.NewTicker(benchPoll)
	defer tick.Stop()
	for {
		st, err := cl.OrchestratorStatus(ctx)
		if err != nil {
			return nil, c.awaitError(ctx, f, mine, err)
		}
		pending := int64(st.QueuedJobs - before.QueuedJobs)
		started.Store(min(n, max(0, n-pending)))
		running.Store(int64(st.RunningJobs))
		if pending <= 0 && st.RunningJobs <= before.RunningJobs {
			jobs, done, err := c.readJobs(ctx, cl, mine, since)
			if err != nil {
				return nil, c.awaitError(ctx, f, mine, err)
			}
			if done {
				return jobs, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, c.awaitError(ctx, f, mine, ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *cmds) awaitError(ctx context.Context, f *benchFlags, mine map[string]bool, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("the %d jobs had not all ended after --timeout %s", len(mine), f.timeout)
	}
	return err
}

// readJobs reads this run's jobs back and reports whether all have ended.
func (c *cmds) readJobs(ctx context.Context, cl *client.Client, mine map[string]bool, since time.Time) ([]api.Job, bool, error) {
	list, err := cl.Jobs(ctx, client.JobFilter{Since: since, Limit: benchMaxStartJobs})
	if err != nil {
		return nil, false, err
	}
	out := make([]api.Job, 0, len(mine))
	for _, j := range list.Jobs {
		if !mine[j.ID] {
			continue
		}
		if !j.State.Terminal() {
			return nil, false, nil
		}
		out = append(out, j)
	}
	if len(out) < len(mine) {
		return nil, false, fmt.Errorf("GET /jobs returned %d of the %d jobs submitted", len(out), len(mine))
	}
	return out, true, nil
}

func (r *startResult) table(w io.Writer) error {
	kind := "GPUs"
	if r.Simulated {
		kind = "simulated GPUs"
	}
	fmt.Fprintf(w, "bench start: %d jobs (command true, 1 GPU each) on %d %s at %s\n", r.N, r.GPUs, kind, r.Server)
	t := cmdkit.NewTable(w)
	t.Row("submitted", fmt.Sprintf("%d in %.2fs (%.0f/s, %d workers)", r.Submitted, r.SubmitWallS, r.SubmissionsPerS, r.Concurrency))
	t.Row("errors", fmtErrors(r.Errors, r.ErrorsByStatus))
	t.Row("started", fmt.Sprintf("%d, first after %.3fs, last after %.3fs", r.Started, r.FirstStartS, r.LastStartS))
	t.Row("ended", fmt.Sprintf("%d completed, %d otherwise, last after %.3fs", r.Completed, r.Failed, r.LastFinishS))
	t.Row("starts", fmt.Sprintf("%.0f jobs/s", r.StartsPerS))
	t.Row("completions", fmt.Sprintf("%.0f jobs/s", r.CompletionsPerS))
	t.Row("wall", strconv.FormatFloat(r.WallS, 'f', 2, 64)+"s")
	t.Row("baseline", fmt.Sprintf("%.0f bare fork+exec+wait of /bin/sh -c true per s, %d at a time (this run)", r.BaselineSpawnsPerS, r.GPUs))
	return t.Flush()
}
