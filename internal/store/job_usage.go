package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// jobUsageSchema is a summary of the ended jobs that are not in memory:
// plain jobs, and the tasks of done arrays (arrays_done.go; until version
// 6, array tasks were left out); how many ended, and their GPU time, by user, project, the hour they
// ended in (hours since the epoch) and final state. It is written with
// the batch that ends each job (Batch.Ended) and decreased when jobs are
// pruned, so that start-up rebuilds the fair-share ledger, the run-time
// estimator (run_seconds: the completed jobs' run times, summed) and the
// counts of ended jobs from one row per user, project and hour instead
// of every job.
const jobUsageSchema = `
CREATE TABLE IF NOT EXISTS job_usage (
	user TEXT NOT NULL,
	project TEXT NOT NULL,
	hour BIGINT NOT NULL,
	state TEXT NOT NULL,
	jobs BIGINT NOT NULL,
	gpu_seconds REAL NOT NULL,
	run_seconds REAL NOT NULL,
	PRIMARY KEY (user, project, hour, state)
);
`

// EndedJob is a job that ended in a batch (a plain job), or a task of an
// array that the batch makes done: what the summary counts of it.
type EndedJob struct {
	User, Project string
	State         api.State
	FinishedAt    time.Time
	GPUSeconds    float64
	RunSeconds    float64 // a completed job's run time (finished - started); 0 otherwise
}

// hourOf is t's hour since the epoch.
func hourOf(t time.Time) int64 { return t.UnixNano() / int64(time.Hour) }

// writeEnded adds the batch's ended jobs to the summary in tx: one
// statement per row of the summary they fall in (an array's last task
// brings all its tasks at once).
func writeEnded(ctx context.Context, tx *sql.Tx, ended []EndedJob) error {
	keys, sums := sumEnded(ended)
	for _, k := range keys {
		v := sums[k]
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_usage(user, project, hour, state, jobs, gpu_seconds, run_seconds) VALUES(?,?,?,?,?,?,?)
			ON CONFLICT(user, project, hour, state) DO UPDATE SET jobs = job_usage.jobs + excluded.jobs,
			gpu_seconds = job_usage.gpu_seconds + excluded.gpu_seconds, run_seconds = job_usage.run_seconds + excluded.run_seconds`,
			k.user, k.project, k.hour, k.state, v.jobs, v.gpuSeconds, v.runSeconds); err != nil {
			return fmt.Errorf("job usage: %w", err)
		}
	}
	return nil
}

// migrateJobUsage creates the summary; when it is new on a store that
// has jobs, it is filled from them once.
func (s *Store) migrateJobUsage(ctx context.Context) error {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'job_usage'`).Scan(&n); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, jobUsageSchema); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO job_usage(user, project, hour, state, jobs, gpu_seconds, run_seconds)
		SELECT user, project, finished / ?, state, COUNT(*), SUM(gpu_seconds),
		SUM(CASE WHEN state = 'completed' AND started > 0 THEN (finished - started) / 1e9 ELSE 0 END) FROM jobs
		WHERE finished > 0 AND array_id = '' AND state IN `+terminalStates+`
		GROUP BY user, project, finished / ?, state`, int64(time.Hour), int64(time.Hour))
	if err != nil {
		return fmt.Errorf("fill job usage: %w", err)
	}
	return nil
}

// UsageRow is one row of the summary of ended jobs: those of a user in a
// project that ended in one hour in one state.
type UsageRow struct {
	User, Project string
	Hour          time.Time // the hour's start
	State         api.State
	Jobs          int
	GPUSeconds    float64
	RunSeconds    float64 // completed jobs' run times, summed
}

// EndedSummary reads the summary of ended jobs (plain jobs and the tasks
// of done arrays), by user, then hour, newest first: what start-up rebuilds the fair-share
// ledger, the run-time estimator and the counts of ended jobs from.
func (s *Store) EndedSummary(ctx context.Context) ([]UsageRow, error) {
	var out []UsageRow
	err := s.read(ctx, `SELECT user, project, hour, state, jobs, gpu_seconds, run_seconds FROM job_usage
		ORDER BY user, hour DESC`, nil, func(r *sql.Rows) error {
		var u UsageRow
		var h int64
		var st string
		if err := r.Scan(&u.User, &u.Project, &h, &st, &u.Jobs, &u.GPUSeconds, &u.RunSeconds); err != nil {
			return err
		}
		u.Hour, u.State = time.Unix(0, h*int64(time.Hour)).UTC(), api.State(st)
		out = append(out, u)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ended jobs' summary: %w", err)
	}
	return out, nil
}

// CountFinished counts the ended jobs of the summary (plain jobs and the
// tasks of done arrays), by state.
func (s *Store) CountFinished(ctx context.Context) (map[api.State]int, error) {
	rows, err := s.EndedSummary(ctx)
	if err != nil {
		return nil, err
	}
	out := map[api.State]int{}
	for _, r := range rows {
		if r.Jobs > 0 {
			out[r.State] += r.Jobs
		}
	}
	return out, nil
}

// usageKey is one row of the summary.
type usageKey struct {
	user, project, state string
	hour                 int64
}

// usageSum is what pruned jobs take off one row.
type usageSum struct {
	jobs                   int64
	gpuSeconds, runSeconds float64
}

// sumEnded groups ended jobs by the summary's rows: the rows' keys, in
// the order first seen (for a deterministic order of writes), and what
// the jobs add to each.
func sumEnded(ended []EndedJob) ([]usageKey, map[usageKey]*usageSum) {
	sums := map[usageKey]*usageSum{}
	var keys []usageKey
	for _, e := range ended {
		k := usageKey{user: e.User, project: e.Project, state: string(e.State), hour: hourOf(e.FinishedAt)}
		if sums[k] == nil {
			sums[k] = &usageSum{}
			keys = append(keys, k)
		}
		sums[k].jobs++
		sums[k].gpuSeconds += e.GPUSeconds
		sums[k].runSeconds += e.RunSeconds
	}
	return keys, sums
}

// endedOf is what the summary counts of a job row that ended: its state,
// owner, end (nanoseconds), GPU time, and run time when it completed.
func endedOf(state api.State, user, project string, started, finished int64, gpuSeconds float64) EndedJob {
	e := EndedJob{User: user, Project: project, State: state, FinishedAt: time.Unix(0, finished).UTC(), GPUSeconds: gpuSeconds}
	if state == api.StateCompleted && started > 0 {
		e.RunSeconds = float64(finished-started) / 1e9
	}
	return e
}

// unsummarize takes pruned jobs out of the summary in tx.
func unsummarize(ctx context.Context, tx *sql.Tx, gone []EndedJob) error {
	keys, sums := sumEnded(gone)
	for _, k := range keys {
		v := sums[k]
		if _, err := tx.ExecContext(ctx, `UPDATE job_usage SET jobs = jobs - ?, gpu_seconds = gpu_seconds - ?, run_seconds = run_seconds - ?
			WHERE user = ? AND project = ? AND hour = ? AND state = ?`, v.jobs, v.gpuSeconds, v.runSeconds,
			k.user, k.project, k.hour, k.state); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM job_usage WHERE jobs <= 0`)
	return err
}
