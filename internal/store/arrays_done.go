package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Done job arrays out of memory. An array is done when every
// task of it has ended. The batch that ends its last task writes the
// array's record with finished set (arrays.go) and adds its tasks to the
// summary of ended jobs (job_usage.go); the orchestrator then drops the
// array and its tasks from memory, as it drops plain jobs that end.
// Start-up reads only the arrays that are not done and their tasks
// (loadArrays, loadLive); the API reads done ones with the queries below,
// by the index of tasks by array.

// arraysDoneSchema indexes arrays by when they were done (start-up reads
// those with 0) and tasks by their array (a done array's counts, its
// tasks for start-up and dependencies). Only array tasks are in
// jobs_by_array, so plain jobs' writes do not pay for it. Schema version
// 6 added both, and arrays.finished.
const arraysDoneSchema = `
CREATE INDEX IF NOT EXISTS arrays_by_finished ON arrays(finished, id);
CREATE INDEX IF NOT EXISTS jobs_by_array ON jobs(array_id, state) WHERE array_id > '';
`

// liveArrayTasks is the FROM clause of the ended tasks of the arrays that
// are not done (j: the task's row): what start-up reads besides the jobs
// not finished. CROSS JOIN makes SQLite read the arrays first (by
// arrays_by_finished), then their tasks by index, never every ended task.
const liveArrayTasks = `arrays a CROSS JOIN jobs j
	WHERE a.finished = 0 AND j.array_id = a.id AND j.array_id > '' AND j.state IN ` + terminalStates

// migrateArraysDone adds arrays.finished to an SQLite store that lacks it,
// creates the indexes, and marks the arrays already done (fillArraysDone).
func (s *Store) migrateArraysDone(ctx context.Context) error {
	have := false
	err := s.each(ctx, `PRAGMA table_info(arrays)`, func(r *sql.Rows) error {
		var cid, notnull, pk int
		var name, typ string
		var dflt sql.NullString
		if err := r.Scan(&cid, &name, &typ, &notnull, &dflt, &pk); err != nil {
			return err
		}
		have = have || name == "finished"
		return nil
	})
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if !have {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE arrays ADD COLUMN finished BIGINT NOT NULL DEFAULT 0`); err != nil {
			return fmt.Errorf("add column arrays.finished: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, arraysDoneSchema); err != nil {
		return fmt.Errorf("array indexes: %w", err)
	}
	if !have {
		if err := fillArraysDone(ctx, tx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// fillArraysDone marks done, in a store written before version 6, the
// arrays whose every task has ended (each such task has a row: a task
// gets one with its first change), and adds their tasks to the summary
// of ended jobs, which left array tasks out until then.
func fillArraysDone(ctx context.Context, tx *sql.Tx) error {
	type cand struct {
		id    string
		tasks int
	}
	var cands []cand
	err := query(ctx, tx, `SELECT id, data FROM arrays WHERE finished = 0`, nil, func(r *sql.Rows) error {
		var c cand
		var data string
		var rec ArrayRecord
		if err := r.Scan(&c.id, &data); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(data), &rec); err != nil {
			return fmt.Errorf("array row: %w", err)
		}
		c.tasks = len(rec.Array.Tasks)
		cands = append(cands, c)
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark done arrays: %w", err)
	}
	for _, c := range cands {
		var ended []EndedJob
		live, last := 0, int64(0)
		err := query(ctx, tx, `SELECT state, user, project, started, finished, gpu_seconds FROM jobs WHERE array_id = ? AND array_id > ''`, []any{c.id}, func(r *sql.Rows) error {
			var st api.State
			var user, project string
			var started, fin int64
			var gpu float64
			if err := r.Scan(&st, &user, &project, &started, &fin, &gpu); err != nil {
				return err
			}
			if !st.Terminal() {
				live++
				return nil
			}
			last = max(last, fin)
			ended = append(ended, endedOf(st, user, project, started, fin, gpu))
			return nil
		})
		if err != nil {
			return fmt.Errorf("mark done arrays: %w", err)
		}
		if live > 0 || len(ended) < c.tasks {
			continue // not done: some task has not ended (or has no row: queued)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE arrays SET finished = ? WHERE id = ?`, max(last, 1), c.id); err != nil {
			return fmt.Errorf("mark done array %s: %w", c.id, err)
		}
		if err := writeEnded(ctx, tx, ended); err != nil {
			return err
		}
	}
	return nil
}

// query runs a query in tx and calls fn for each row.
func query(ctx context.Context, tx *sql.Tx, q string, args []any, fn func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	return eachRow(rows, err, fn)
}

// ErrNoArray is returned by Array for an id that names no array.
var ErrNoArray = errors.New("no such job array")

// Array returns the record of job array id, done or not, with its counts
// by state read from its tasks' rows (a task without one is queued: it
// never changed) and, when it is done, Finished; ErrNoArray when there is
// none. The record's Array.State is left empty.
func (s *Store) Array(ctx context.Context, id string) (ArrayRecord, error) {
	var rec ArrayRecord
	found := false
	err := s.read(ctx, `SELECT data, finished FROM arrays WHERE id = ?`, []any{id}, func(r *sql.Rows) error {
		var data string
		var fin int64
		if err := r.Scan(&data, &fin); err != nil {
			return err
		}
		found = true
		if fin > 0 {
			rec.Finished = time.Unix(0, fin).UTC()
		}
		return json.Unmarshal([]byte(data), &rec)
	})
	if err != nil {
		return ArrayRecord{}, fmt.Errorf("array %s: %w", id, err)
	}
	if !found {
		return ArrayRecord{}, fmt.Errorf("array %s: %w", id, ErrNoArray)
	}
	rowed := 0
	err = s.read(ctx, `SELECT state, COUNT(*) FROM jobs WHERE array_id = ? AND array_id > '' GROUP BY state`, []any{id}, func(r *sql.Rows) error {
		var st api.State
		var n int
		if err := r.Scan(&st, &n); err != nil {
			return err
		}
		rec.Array.Counts.Add(st, n)
		rowed += n
		return nil
	})
	if err != nil {
		return ArrayRecord{}, fmt.Errorf("array %s: %w", id, err)
	}
	rec.Array.Counts.Queued += max(len(rec.Array.Tasks)-rowed, 0)
	return rec, nil
}

// ArrayIDsWithPrefix returns up to limit ids of arrays, done or not, that
// start with prefix, in id order.
func (s *Store) ArrayIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error) {
	return s.readIDs(ctx, "array ids", `SELECT id FROM arrays WHERE id >= ? AND id < ? ORDER BY id LIMIT ?`,
		prefix, prefix+"\U0010FFFF", limit)
}

// FirstEnded returns, without its events, the task of array id in one of
// states that ended first (ties: the smaller id); ErrNoJob when none is.
// A dependency on a done array reads with it the task that decides its
// outcome.
func (s *Store) FirstEnded(ctx context.Context, id string, states ...api.State) (api.Job, error) {
	args := []any{id}
	for _, st := range states {
		args = append(args, string(st))
	}
	var j api.Job
	found := false
	err := s.read(ctx, `SELECT data FROM jobs WHERE array_id = ? AND array_id > '' AND state IN (`+placeholders(len(states))+`)
		ORDER BY finished, id LIMIT 1`, args, jobRows(func(t api.Job) error {
		j, found = t, true
		return nil
	}))
	if err != nil {
		return api.Job{}, fmt.Errorf("array %s: %w", id, err)
	}
	if !found {
		return api.Job{}, fmt.Errorf("array %s: %w", id, ErrNoJob)
	}
	return j, nil
}

// DependencyIDs returns up to limit ids, in order, that a dependency
// naming prefix may mean: arrays whose ids start with it, and jobs whose
// ids start with it other than the tasks of those arrays (a prefix of an
// array's id names the array, not one of its tasks).
func (s *Store) DependencyIDs(ctx context.Context, prefix string, limit int) ([]string, error) {
	end := prefix + "\U0010FFFF"
	return s.readIDs(ctx, "dependency ids", `SELECT id FROM jobs WHERE id >= ? AND id < ? AND NOT (array_id >= ? AND array_id < ?)
		UNION SELECT id FROM arrays WHERE id >= ? AND id < ? ORDER BY id LIMIT ?`,
		prefix, end, prefix, end, prefix, end, limit)
}
