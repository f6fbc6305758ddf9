package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/store"
)

// benchFillBatch is how many jobs one transaction of bench fill writes.
const benchFillBatch = 5000

type fillFlags struct {
	dataDir  string
	finished int
	queued   int
	users    int
	days     int
}

type fillResult struct {
	Finished    int     `json:"finished"`
	Queued      int     `json:"queued"`
	Events      int     `json:"events"`
	WallS       float64 `json:"wall_s"`
	JobsPerS    float64 `json:"jobs_per_s"`
	DatabaseMiB float64 `json:"database_mib"`
}

func (r fillResult) table(w io.Writer) error {
	_, err := fmt.Fprintf(w, "wrote %d finished and %d queued jobs (%d events) in %.1fs (%.0f jobs/s); database %.0f MiB\n",
		r.Finished, r.Queued, r.Events, r.WallS, r.JobsPerS, r.DatabaseMiB)
	return err
}

func (c *cmds) newBenchFillCmd() *cobra.Command {
	f := &fillFlags{}
	cmd := &cobra.Command{
		Use:   "fill --data-dir D [--finished N] [--queued N]",
		Short: "Fill a stopped server's store with finished (and queued) jobs, fast",
		Long: `Write jobs straight into the store of a data dir that no server is using, in
transactions of 5,000 jobs, to measure a server with a long history (restart
time, memory, GET /jobs latency; docs/benchmarks.md). Each finished job is
completed, ran on one GPU for a few minutes, and has its five events (queued,
scheduled, allocating, running, completed); each queued job has its
submission event. Jobs belong to --users users (user0, user1, ...) in ten
projects, and were submitted over the last --days days, oldest first.`,
		Example: `  corral bench fill --data-dir /tmp/corral-big --finished 1000000
  corral server --data-dir /tmp/corral-big`,
		Args: cmdkit.ArgsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case f.dataDir == "":
				return cmdkit.Usagef("--data-dir is required")
			case f.finished < 0 || f.queued < 0:
				return cmdkit.Usagef("--finished and --queued must not be negative")
			case f.users < 1:
				return cmdkit.Usagef("--users must be at least 1")
			case f.days < 1:
				return cmdkit.Usagef("--days must be at least 1")
			}
			res, err := benchFill(cmd.Context(), f)
			if err != nil {
				return err
			}
			return c.Emit(res, res.table)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "", "the data dir to fill (no server may be using it)")
	fl.IntVar(&f.finished, "finished", 100000, "how many completed jobs to write")
	fl.IntVar(&f.queued, "queued", 0, "how many queued jobs to write (after the finished ones)")
	fl.IntVar(&f.users, "users", 100, "how many users the jobs belong to")
	fl.IntVar(&f.days, "days", 30, "over how many days the jobs were submitted")
	return cmd
}

// benchFill writes the jobs of f into its data dir's store.
func benchFill(ctx context.Context, f *fillFlags) (fillResult, error) {
	dir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return fillResult{}, err
	}
	release, err := store.Lock(dir)
	if err != nil {
		return fillResult{}, err
	}
	defer release()
	if err := store.SecureDataDir(dir, "logs"); err != nil {
		return fillResult{}, err
	}
	path := filepath.Join(dir, "corral.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		return fillResult{}, err
	}
	defer st.Close()
	began := time.Now()
	total := f.finished + f.queued
	end := began.UTC().Add(-time.Hour)
	step := time.Duration(f.days) * 24 * time.Hour / time.Duration(max(total, 1))
	at := end.Add(-time.Duration(total) * step)
	entropy := ulid.Monotonic(rand.Reader, 0)
	res := fillResult{Finished: f.finished, Queued: f.queued}
	var b store.Batch
	for i := range total {
		at = at.Add(step)
		id := "j" + strings.ToLower(ulid.MustNew(ulid.Timestamp(at), entropy).String())
		u := i % f.users
		j := api.Job{ID: id, Name: fmt.Sprintf("train-%d", i%50), User: fmt.Sprintf("user%d", u), Project: fmt.Sprintf("proj%d", u%10),
			Command: "python train.py --epochs 3", GPUCount: 1, Nodes: 1, Priority: api.PriorityNormal, MaxRetries: 0,
			State: api.StateQueued, Reason: api.ReasonSubmitted, SubmittedAt: at, Allocation: []api.Allocation{}}
		b.Events = append(b.Events, store.JobEvent{JobID: id, Event: api.Event{At: at, To: api.StateQueued, Reason: api.ReasonSubmitted}})
		if i < f.finished {
			start := at.Add(2 * time.Second)
			done := start.Add(time.Duration(60+i%600) * time.Second)
			code := 0
			j.State, j.Reason, j.Message = api.StateCompleted, api.ReasonExited, "exit code 0"
			j.StartedAt, j.FinishedAt, j.ExitCode = &start, &done, &code
			j.GPUSeconds = done.Sub(start).Seconds()
			b.Ended = append(b.Ended, store.EndedJob{User: j.User, Project: j.Project, State: j.State, FinishedAt: done, GPUSeconds: j.GPUSeconds, RunSeconds: j.GPUSeconds})
			j.Allocation = []api.Allocation{{NodeID: fmt.Sprintf("node%d", i%16), GPUID: i % 8, GPUUUID: fmt.Sprintf("GPU-%d-%d", i%16, i%8), MemoryGB: 80}}
			b.Events = append(b.Events,
				store.JobEvent{JobID: id, Event: api.Event{At: at.Add(time.Second), From: api.StateQueued, To: api.StateScheduled, Reason: "scheduled"}},
				store.JobEvent{JobID: id, Event: api.Event{At: at.Add(time.Second), From: api.StateScheduled, To: api.StateAllocating, Reason: "allocating"}},
				store.JobEvent{JobID: id, Event: api.Event{At: start, From: api.StateAllocating, To: api.StateRunning, Reason: "started"}},
				store.JobEvent{JobID: id, Event: api.Event{At: done, From: api.StateRunning, To: api.StateCompleted, Reason: api.ReasonExited, Message: "exit code 0"}})
		}
		b.Jobs = append(b.Jobs, j)
		if len(b.Jobs) == benchFillBatch || i == total-1 {
			res.Events += len(b.Events)
			if err := st.Commit(ctx, &b); err != nil {
				return res, err
			}
			b = store.Batch{}
		}
	}
	res.WallS = time.Since(began).Seconds()
	res.JobsPerS = float64(total) / max(res.WallS, 1e-9)
	res.DatabaseMiB = fileMiB(path) + fileMiB(path+"-wal")
	return res, nil
}
