package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// runsSchema is the history of run times the scheduler learns from
// (package runtimes): one row per attempt that ran to its own end,
// written in the orchestrator's Batch with the change that ends it.
// (job_id, attempt) is a row's identity: a row written again replaces
// itself. command_fp is a fingerprint of the command (hex SHA-256,
// truncated), never the command itself. Times and durations are
// nanoseconds (since the epoch for end_ns); time_limit_ns 0 is none.
const runsSchema = `
CREATE TABLE IF NOT EXISTS runs (
	job_id TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	user_name TEXT NOT NULL,
	project TEXT NOT NULL,
	name TEXT NOT NULL,
	command_fp TEXT NOT NULL,
	gpus INTEGER NOT NULL,
	gpu_model TEXT NOT NULL,
	time_limit_ns BIGINT NOT NULL,
	run_ns BIGINT NOT NULL,
	end_ns BIGINT NOT NULL,
	outcome TEXT NOT NULL,
	PRIMARY KEY (job_id, attempt)
);
CREATE INDEX IF NOT EXISTS runs_end ON runs(end_ns);
`

// RunRow is one run of a job: an attempt that started and ended on its
// own (package runtimes says which endings count).
type RunRow struct {
	JobID     string
	Attempt   int
	User      string
	Project   string
	Name      string // the job's name ("" none)
	CommandFP string // fingerprint of the command
	GPUs      int    // GPUs in all
	GPUModel  string
	TimeLimit time.Duration // asked for; 0 none
	Ran       time.Duration
	EndedAt   time.Time
	Outcome   string // the reason of the ending transition ("exited", "exit_code", "time_limit", ...)
}

// DefaultLoadRuns is how many of the most recent runs Load reads: with
// sched.DefaultPredictWindow (20) runs kept per key, enough for a
// thousand keys' full windows.
const DefaultLoadRuns = 20000

// insertRuns is the runs' multi-row upsert (rows.go).
var insertRuns = insertSpec{`INSERT INTO runs(job_id, attempt, user_name, project, name, command_fp, gpus, gpu_model, time_limit_ns, run_ns, end_ns, outcome)`, 12,
	` ON CONFLICT(job_id, attempt) DO UPDATE SET user_name=excluded.user_name, project=excluded.project, name=excluded.name,
	command_fp=excluded.command_fp, gpus=excluded.gpus, gpu_model=excluded.gpu_model, time_limit_ns=excluded.time_limit_ns,
	run_ns=excluded.run_ns, end_ns=excluded.end_ns, outcome=excluded.outcome`}

// writeRuns upserts run rows in tx, many per statement.
func writeRuns(ctx context.Context, tx *sql.Tx, ins inserts, rows []RunRow) error {
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, insertRuns.ncols*len(rows))
	for _, r := range rows {
		if err := checkRun(r); err != nil {
			return err
		}
		args = append(args, r.JobID, r.Attempt, r.User, r.Project, r.Name, r.CommandFP, r.GPUs, r.GPUModel,
			int64(r.TimeLimit), int64(r.Ran), r.EndedAt.UnixNano(), r.Outcome)
	}
	if err := ins.insert(ctx, tx, insertRuns, args); err != nil {
		return fmt.Errorf("run rows: %w", err)
	}
	return nil
}

// checkRun refuses a run row the table cannot hold.
func checkRun(r RunRow) error {
	what := "run of " + r.JobID
	if err := checkNanos(what, r.EndedAt); err != nil {
		return err
	}
	if r.Ran < 0 || r.TimeLimit < 0 {
		return fmt.Errorf("%w: %s: a negative run time or time limit", ErrUnstorable, what)
	}
	return checkText(what, r.JobID, r.User, r.Project, r.Name, r.CommandFP, r.GPUModel, r.Outcome)
}

// loadRuns reads the limit most recent runs, oldest first (the order a
// predictor learns them in).
func (s *Store) loadRuns(ctx context.Context, limit int) ([]RunRow, error) {
	var out []RunRow
	q := fmt.Sprintf(`SELECT job_id, attempt, user_name, project, name, command_fp, gpus, gpu_model, time_limit_ns, run_ns, end_ns, outcome
		FROM runs ORDER BY end_ns DESC, job_id DESC, attempt DESC LIMIT %d`, limit)
	err := s.each(ctx, q, func(rows *sql.Rows) error {
		var r RunRow
		var limitNS, ranNS, endNS int64
		if err := rows.Scan(&r.JobID, &r.Attempt, &r.User, &r.Project, &r.Name, &r.CommandFP, &r.GPUs, &r.GPUModel,
			&limitNS, &ranNS, &endNS, &r.Outcome); err != nil {
			return err
		}
		r.TimeLimit, r.Ran, r.EndedAt = time.Duration(limitNS), time.Duration(ranNS), time.Unix(0, endNS).UTC()
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// PruneRuns deletes, oldest first and at most limit of them, the runs
// that ended before before and are not among the keep most recent (those
// Load reads back for the predictor: a quiet cluster keeps what it
// learned), and returns how many it deleted.
func (s *Store) PruneRuns(ctx context.Context, before time.Time, keep, limit int) (int, error) {
	bound := before.UnixNano()
	if keep > 0 {
		found := false
		err := s.read(ctx, `SELECT end_ns FROM runs ORDER BY end_ns DESC LIMIT 1 OFFSET ?`, []any{keep - 1}, func(rows *sql.Rows) error {
			var end int64
			if err := rows.Scan(&end); err != nil {
				return err
			}
			bound, found = min(bound, end), true
			return nil
		})
		if err != nil || !found { // fewer than keep runs: none goes
			return 0, err
		}
	}
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs WHERE end_ns < ? ORDER BY end_ns LIMIT ?)`, bound, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	return int(n), nil
}
