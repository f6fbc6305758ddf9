package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Finished jobs live here, not in the orchestrator's memory:
// start-up reads only the jobs that are not finished (and the ended tasks
// of arrays that are not done, which their arrays' books keep), and the
// API reads the past with the indexed, keyset-paginated queries below.
//
// Each job row carries, besides its JSON, the columns its queries filter
// and sort on: name, submitted/started/finished (nanoseconds since the
// epoch; 0: not yet), gpu_seconds and array_id ("" for a plain job).
// Version 5 of the schema added them; migrateJobColumns adds them to an
// older store and fills them from the rows' JSON.

// jobColumns are the columns version 5 added to jobs, with their types.
var jobColumns = []struct{ name, decl string }{
	{"name", "TEXT NOT NULL DEFAULT ''"},
	{"submitted", "BIGINT NOT NULL DEFAULT 0"},
	{"started", "BIGINT NOT NULL DEFAULT 0"},
	{"finished", "BIGINT NOT NULL DEFAULT 0"},
	{"gpu_seconds", "REAL NOT NULL DEFAULT 0"},
	{"array_id", "TEXT NOT NULL DEFAULT ''"},
}

// jobsHistorySchema indexes jobs for the API's filters (each with the id,
// the order of pages), start-up (state), pruning (finished), and events
// and idempotency keys by job. The ledger and the counts read the
// summary in job_usage.go.
const jobsHistorySchema = `
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, array_id, id);
CREATE INDEX IF NOT EXISTS jobs_by_user ON jobs(user, id);
CREATE INDEX IF NOT EXISTS jobs_by_project ON jobs(project, id);
CREATE INDEX IF NOT EXISTS jobs_by_name ON jobs(name, id);
CREATE INDEX IF NOT EXISTS jobs_by_finished ON jobs(finished);
CREATE INDEX IF NOT EXISTS jobs_ended ON jobs(id, state, array_id, submitted) WHERE finished > 0;
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id, seq);
CREATE INDEX IF NOT EXISTS idempotency_by_job ON idempotency(job_id);
`

// terminalStates and liveStates are the SQL lists of the finished
// states and of the others.
const (
	terminalStates = `('completed','failed','canceled')`
	liveStates     = `('queued','scheduled','allocating','running')`
)

// migrateJobColumns adds version 5's columns to a jobs table that lacks
// them and fills them from each row's JSON, then creates the indexes.
func (s *Store) migrateJobColumns(ctx context.Context) error {
	have := map[string]bool{}
	err := s.each(ctx, `PRAGMA table_info(jobs)`, func(r *sql.Rows) error {
		var cid, notnull, pk int
		var name, typ string
		var dflt sql.NullString
		if err := r.Scan(&cid, &name, &typ, &notnull, &dflt, &pk); err != nil {
			return err
		}
		have[name] = true
		return nil
	})
	if err != nil {
		return err
	}
	added := false
	for _, c := range jobColumns {
		if have[c.name] {
			continue
		}
		if _, err := s.db.ExecContext(ctx, `ALTER TABLE jobs ADD COLUMN `+c.name+` `+c.decl); err != nil {
			return fmt.Errorf("add column jobs.%s: %w", c.name, err)
		}
		added = true
	}
	if added {
		// A store written by an older corral: its rows' columns come from
		// their JSON, once (SQLite's JSON functions; times to the second).
		ns := func(field string) string {
			return `COALESCE(CAST(strftime('%s', json_extract(data, '$.` + field + `')) AS INTEGER) * 1000000000, 0)`
		}
		q := `UPDATE jobs SET name = COALESCE(json_extract(data, '$.name'), ''),
			submitted = ` + ns("submitted_at") + `, started = ` + ns("started_at") + `,
			finished = ` + ns("finished_at") + `,
			gpu_seconds = COALESCE(json_extract(data, '$.gpu_seconds'), 0),
			array_id = COALESCE(json_extract(data, '$.array_job_id'), '')`
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("fill jobs' new columns: %w", err)
		}
	}
	if err := backfillEnded(ctx, s.db, false); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, jobsHistorySchema); err != nil {
		return fmt.Errorf("job indexes: %w", err)
	}
	return s.migrateJobUsage(ctx) // job_usage.go
}

// backfillEnded gives finished = 1 (ended, at an unknown time: jobRow's
// value) to the ended rows that have 0, once, before the index jobs_ended
// is made: it and the pages of ended jobs (jobsQuery) know ended rows by
// finished > 0, and a row an older corral wrote without finished_at came
// out of migrateJobColumns with 0.
func backfillEnded(ctx context.Context, db execer, pg bool) error {
	var have bool
	var err error
	if pg {
		var name sql.NullString
		err = db.QueryRowContext(ctx, `SELECT to_regclass('jobs_ended')::text`).Scan(&name)
		have = name.Valid
	} else {
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'index' AND name = 'jobs_ended'`).Scan(&have)
	}
	if err != nil || have {
		return err
	}
	if _, err := db.ExecContext(ctx, `UPDATE jobs SET finished = 1 WHERE finished = 0 AND state IN `+terminalStates); err != nil {
		return fmt.Errorf("mark ended jobs: %w", err)
	}
	return nil
}

// nanos is t in nanoseconds since the epoch; 0 for nil.
func nanos(t *time.Time) int64 {
	if t == nil || t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// jobRow is the values of one job's row, in insertJobs' column order.
func jobRow(j *api.Job, data []byte) []any {
	finished := int64(0)
	if j.State.Terminal() {
		finished = nanos(j.FinishedAt)
		if finished == 0 {
			finished = 1 // finished, at an unknown time: still not 0
		}
	}
	return []any{j.ID, string(j.State), j.User, j.Project, string(data),
		j.Name, nanos(&j.SubmittedAt), nanos(j.StartedAt), finished, j.GPUSeconds, j.ArrayJobID}
}

// JobQuery selects finished or any jobs from the store for GET /jobs.
// Zero fields match everything.
type JobQuery struct {
	States  []api.State // any of these; none: every state
	User    string
	Project string
	Name    string
	Since   time.Time // submitted at or after
	Until   time.Time // submitted before
	Before  string    // ids below this one only (the page's cursor)
	Limit   int       // at most this many; 0: 100
	// SkipArrays leaves out the tasks of these arrays (the orchestrator
	// holds those of the arrays that are not done).
	SkipArrays []string
	// MaxBytes, when positive, stops the page once its rows' JSON passes
	// it (the row that passes it is kept): a page of large jobs is cut
	// short rather than read whole into memory. JobsPage says so.
	MaxBytes int64
}

// Jobs returns the jobs that match, newest (largest id) first, without
// their events.
func (s *Store) Jobs(ctx context.Context, q JobQuery) ([]api.Job, error) {
	jobs, _, err := s.JobsPage(ctx, q)
	return jobs, err
}

// errPageFull stops a page's rows at its MaxBytes.
var errPageFull = errors.New("the page is full")

// JobsPage is Jobs, and whether the page stopped at q.MaxBytes before its
// limit (more rows may match).
func (s *Store) JobsPage(ctx context.Context, q JobQuery) ([]api.Job, bool, error) {
	query, args := jobsQuery(q, s.pg)
	out := []api.Job{}
	var size int64
	err := s.read(ctx, query, args, func(r *sql.Rows) error {
		if q.MaxBytes > 0 && size > q.MaxBytes {
			return errPageFull
		}
		var data string
		if err := r.Scan(&data); err != nil {
			return err
		}
		size += int64(len(data))
		var j api.Job
		if err := json.Unmarshal([]byte(data), &j); err != nil {
			return fmt.Errorf("job row: %w", err)
		}
		out = append(out, j)
		return nil
	})
	cut := errors.Is(err, errPageFull)
	if err != nil && !cut {
		return nil, false, fmt.Errorf("jobs: %w", err)
	}
	return out, cut, nil
}

// jobsQuery is the SQL of Jobs and its arguments (for PostgreSQL when pg).
//
// Ended jobs are most of a store (57,000 of them in 505 MB in one test),
// so a page of them must walk an index in id order and stop at the
// limit: jobs_ended, the ended jobs' ids with the columns the filters
// test, so rows that do not match are skipped without reading their JSON.
// SQLite, with no statistics, would rather take jobs_by_state and sort
// every ended job (reading them all: 5 s for ?limit=10), so the state
// test is kept off that index ("+state"); the filters by user, project
// and name still use their own indexes, in id order too.
func jobsQuery(q JobQuery, pg bool) (string, []any) {
	var where []string
	var args []any
	ended := len(q.States) > 0 && !slices.ContainsFunc(q.States, func(s api.State) bool { return !s.Terminal() })
	if len(q.States) > 0 {
		// The state first: it is read before the JSON in a row, the
		// finished column after it.
		col := "state"
		if ended && !pg {
			col = "+state"
		}
		where = append(where, col+" IN ("+placeholders(len(q.States))+")")
		for _, st := range q.States {
			args = append(args, string(st))
		}
	}
	if ended {
		where = append(where, "finished > 0") // jobs_ended's condition
	}
	for _, f := range []struct{ col, v string }{{"user", q.User}, {"project", q.Project}, {"name", q.Name}} {
		if f.v != "" {
			where = append(where, f.col+" = ?")
			args = append(args, f.v)
		}
	}
	if !q.Since.IsZero() {
		where, args = append(where, "submitted >= ?"), append(args, q.Since.UnixNano())
	}
	if !q.Until.IsZero() {
		where, args = append(where, "submitted < ?"), append(args, q.Until.UnixNano())
	}
	if q.Before != "" {
		where, args = append(where, "id < ?"), append(args, q.Before)
	}
	if len(q.SkipArrays) > 0 {
		where, args = append(where, "array_id NOT IN ("+placeholders(len(q.SkipArrays))+")"), append(args, anys(q.SkipArrays)...)
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	query := "SELECT data FROM jobs"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id DESC LIMIT ?"
	args = append(args, q.Limit)
	return query, args
}

// ErrNoJob is returned by Job for an id the store does not hold.
var ErrNoJob = errors.New("no such job")

// Job returns one job with its events, in order (an array task's with
// its array's submission event first); ErrNoJob when there is none.
func (s *Store) Job(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	found := false
	err := s.read(ctx, `SELECT data FROM jobs WHERE id = ?`, []any{id}, func(r *sql.Rows) error {
		var data string
		if err := r.Scan(&data); err != nil {
			return err
		}
		found = true
		return json.Unmarshal([]byte(data), &j)
	})
	if err != nil {
		return api.Job{}, fmt.Errorf("job %s: %w", id, err)
	}
	if !found {
		return api.Job{}, fmt.Errorf("job %s: %w", id, ErrNoJob)
	}
	err = s.read(ctx, `SELECT data FROM events WHERE job_id = ? ORDER BY seq`, []any{id}, func(r *sql.Rows) error {
		var data string
		if err := r.Scan(&data); err != nil {
			return err
		}
		var e api.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("event row: %w", err)
		}
		j.Events = append(j.Events, e)
		return nil
	})
	if err != nil {
		return api.Job{}, fmt.Errorf("job %s: %w", id, err)
	}
	if j.ArrayJobID != "" && (len(j.Events) == 0 || j.Events[0].From != "") {
		// An array task's submission event is its array's, in the
		// record only (arrays.go): the same event start-up gives it.
		sub := api.Event{At: j.SubmittedAt, To: api.StateQueued, Reason: api.ReasonSubmitted}
		j.Events = append([]api.Event{sub}, j.Events...)
	}
	return j, nil
}

// JobIDsWithPrefix returns up to limit ids of jobs that start with prefix,
// in id order.
func (s *Store) JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error) {
	return s.readIDs(ctx, "job ids", `SELECT id FROM jobs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?`,
		prefix, prefix+"\U0010FFFF", limit)
}

// readIDs runs a query of one column of ids; what names them in its error.
func (s *Store) readIDs(ctx context.Context, what, query string, args ...any) ([]string, error) {
	var out []string
	err := s.read(ctx, query, args, func(r *sql.Rows) error {
		var id string
		if err := r.Scan(&id); err != nil {
			return err
		}
		out = append(out, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// IdempotentJob returns the id of the job submitted under key, and
// whether there is one.
func (s *Store) IdempotentJob(ctx context.Context, key string) (string, bool, error) {
	var id string
	found := false
	err := s.read(ctx, `SELECT job_id FROM idempotency WHERE key = ?`, []any{key}, func(r *sql.Rows) error {
		found = true
		return r.Scan(&id)
	})
	if err != nil {
		return "", false, fmt.Errorf("idempotency key: %w", err)
	}
	return id, found, nil
}

// PrunedJob is a job PruneFinished deleted.
type PrunedJob struct {
	ID    string
	State api.State
}

// PruneFinished deletes up to limit finished jobs that are not array
// tasks and finished before before, other than those keep names (ended
// jobs that waiting jobs depend on), with their events and idempotency
// keys, in one transaction, and returns them (none: nothing is left to
// prune).
func (s *Store) PruneFinished(ctx context.Context, before time.Time, limit int, keep []string) ([]PrunedJob, error) {
	var ids []string
	var out []PrunedJob
	var ended []EndedJob
	query, qargs := notIn(`SELECT id, state, user, project, started, finished, gpu_seconds FROM jobs
		WHERE finished > 0 AND finished < ? AND array_id = ''`, []any{before.UnixNano()}, "id", keep)
	err := s.read(ctx, query+` LIMIT ?`, append(qargs, limit), prunedRow(func(p PrunedJob, e EndedJob) {
		ids, out, ended = append(ids, p.ID), append(out, p), append(ended, e)
	}))
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	ph, args := placeholders(len(ids)), anys(ids)
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, t := range []string{"events WHERE job_id", "idempotency WHERE job_id", "jobs WHERE id"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+t+` IN (`+ph+`)`, args...); err != nil {
				return err
			}
		}
		if err := pruneNumbers(ctx, tx, ph, args); err != nil { // numbers.go
			return err
		}
		return unsummarize(ctx, tx, ended) // job_usage.go
	})
	if err != nil {
		return nil, fmt.Errorf("prune finished jobs: %w", err)
	}
	return out, nil
}

// prunedRow reads a row of (id, state, user, project, started, finished,
// gpu_seconds) of a job about to be pruned and hands add the job and what
// the ended-jobs summary counts of it (for unsummarize).
func prunedRow(add func(PrunedJob, EndedJob)) func(*sql.Rows) error {
	return func(r *sql.Rows) error {
		var p PrunedJob
		var user, project string
		var started, fin int64
		var gpu float64
		if err := r.Scan(&p.ID, &p.State, &user, &project, &started, &fin, &gpu); err != nil {
			return err
		}
		add(p, endedOf(p.State, user, project, started, fin, gpu))
		return nil
	}
}

// read runs a query on the store's readers (WAL: reads do not wait for
// the writer) and calls fn for each row.
func (s *Store) read(ctx context.Context, query string, args []any, fn func(*sql.Rows) error) error {
	db := s.rdb
	if db == nil {
		db = s.db
	}
	rows, err := db.QueryContext(ctx, query, args...)
	return eachRow(rows, err, fn)
}

// eachRow calls fn for each of a query's rows (err: the query's error)
// and closes them.
func eachRow(rows *sql.Rows, err error, fn func(*sql.Rows) error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// loadLive reads the jobs start-up needs: those not finished, and the
// ended tasks of the arrays that are not done (arrays_done.go), in id
// order, each with its events; and the idempotency keys of those jobs.
func (s *Store) loadLive(ctx context.Context, st *State) error {
	// Sized first: growing a slice of 100,000 jobs copies it again and again.
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM jobs WHERE state IN `+liveStates+`)
		+ (SELECT COUNT(*) FROM `+liveArrayTasks+`)`).Scan(&n); err != nil {
		return err
	}
	st.Jobs = make([]api.Job, 0, n)
	err := s.each(ctx, `SELECT data FROM jobs WHERE state IN `+liveStates+`
		UNION ALL SELECT j.data FROM `+liveArrayTasks, jobRows(func(j api.Job) error {
		st.Jobs = append(st.Jobs, j)
		return nil
	}))
	if err != nil {
		return err
	}
	slices.SortFunc(st.Jobs, func(a, b api.Job) int { return strings.Compare(a.ID, b.ID) })
	index := make(map[string]int, len(st.Jobs))
	for i := range st.Jobs {
		index[st.Jobs[i].ID] = i
	}
	err = s.each(ctx, `SELECT e.job_id, e.data FROM (SELECT id FROM jobs WHERE state IN `+liveStates+`
		UNION ALL SELECT j.id FROM `+liveArrayTasks+`) l
		JOIN events e ON e.job_id = l.id ORDER BY e.seq`, func(r *sql.Rows) error {
		var id, data string
		var e api.Event
		if err := r.Scan(&id, &data); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("event row: %w", err)
		}
		if i, ok := index[id]; ok {
			st.Jobs[i].Events = append(st.Jobs[i].Events, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.each(ctx, `SELECT i.key, i.job_id FROM idempotency i JOIN jobs j ON j.id = i.job_id WHERE j.state IN `+liveStates, func(r *sql.Rows) error {
		var k, id string
		if err := r.Scan(&k, &id); err != nil {
			return err
		}
		st.Idempotency[k] = id
		return nil
	})
}

// jobRows reads rows of one column, a job's JSON (SELECT data FROM jobs),
// handing fn each job.
func jobRows(fn func(api.Job) error) func(*sql.Rows) error {
	return func(r *sql.Rows) error {
		var data string
		if err := r.Scan(&data); err != nil {
			return err
		}
		var j api.Job
		if err := json.Unmarshal([]byte(data), &j); err != nil {
			return fmt.Errorf("job row: %w", err)
		}
		return fn(j)
	}
}
