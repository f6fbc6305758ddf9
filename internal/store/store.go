// Package store persists Corral's state in an embedded SQLite database
// (modernc.org/sqlite, pure Go) in WAL mode with synchronous=FULL, so a
// committed batch survives kill -9 and power loss.
//
// The orchestrator is the only writer. It hands the store whole batches of
// changes (job rows, transition events, holds, idempotency keys, settings)
// and each batch is one transaction: many API calls acknowledged together
// cost one fsync (group commit). Start-up reads what is not finished;
// finished jobs are read on demand, by indexed queries (jobs_history.go).
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// schemaVersion is the layout written by this code; Open refuses newer ones.
// Version 2 added tokens and audit (auth.go); both are created on an
// existing database by the same CREATE ... IF NOT EXISTS statements.
// Version 3 added notification endpoints and the outbox (notify.go), the
// same way. Version 4 added job arrays (arrays.go): a task that never
// changed has no job row, so an older corral must not read such a store.
// The usage ledger (usage.go) came without a new version: an older corral
// reads such a store correctly and only leaves the ledger unwritten.
// Version 5 added jobs' query columns and the indexes that read finished
// jobs from the store instead of memory (jobs_history.go). Version 6 added
// arrays.finished and the indexes that read done arrays from the store
// (arrays_done.go), and counts their tasks in the summary of ended jobs:
// an older corral would count them twice.
const schemaVersion = 6

const schema = `
CREATE TABLE IF NOT EXISTS jobs (
	id TEXT PRIMARY KEY,
	state TEXT NOT NULL,
	user TEXT NOT NULL,
	project TEXT NOT NULL,
	data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id TEXT NOT NULL,
	data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS holds (
	job_id TEXT PRIMARY KEY,
	data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
	key TEXT PRIMARY KEY,
	job_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS nodes (
	id TEXT PRIMARY KEY,
	data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (
	key TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
-- Nothing reads jobs by state or events by job (the store is read whole,
-- at start-up): indexes on them only cost every write. Earlier versions
-- made them.
DROP INDEX IF EXISTS jobs_state;
DROP INDEX IF EXISTS events_job;
`

// Store is an open database. Its methods are safe for concurrent use, but
// Corral calls Commit from one goroutine only.
type Store struct {
	db      *sql.DB
	rdb     *sql.DB // readers of finished jobs (jobs_history.go); nil: db
	pg      bool    // PostgreSQL (postgres.go), not SQLite
	fence   fence   // the leader lease's epoch writes check (leaderlease.go)
	inserts inserts // prepared multi-row INSERTs (rows.go)

	// The committer (group.go).
	reqs      chan *writeReq
	quit      chan struct{}
	stopped   chan struct{}
	closing   sync.RWMutex // guards closed
	closed    bool
	closeOnce sync.Once
}

// Open opens (creating when needed) the SQLite database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// SQLite gives the -wal and -shm files the database's mode: make it
	// 0600 before SQLite creates it (perms.go).
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(5000)", "foreign_keys(ON)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway
	// Readers on connections of their own: in WAL mode they read the last
	// commit while the writer writes.
	rdb, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode()+"&_pragma=query_only(1)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(4)
	s, err := start(ctx, db, rdb, false)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// OpenPostgres opens (creating its tables when needed) the PostgreSQL
// database named by dsn (postgres://user@host:port/db?...; see pgx's
// connection strings). The same code as on SQLite runs there: its SQL
// is rewritten on the way (dialect.go). A commit returns once PostgreSQL
// has made it durable (synchronous_commit, on by default, must stay on).
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	db, err := openPostgres(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", redact(dsn), err)
	}
	db.SetMaxOpenConns(8) // the committer's transaction, and the server's reads beside it
	s, err := start(ctx, db, nil, true)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", redact(dsn), err)
	}
	return s, nil
}

// start creates or upgrades the tables of db, prepares the inserts and
// starts the committer; rdb, when not nil, serves reads of finished jobs
// beside the writer. It closes db and rdb when it fails.
func start(ctx context.Context, db, rdb *sql.DB, pg bool) (*Store, error) {
	s := &Store{db: db, rdb: rdb, pg: pg}
	fail := func(err error) (*Store, error) {
		if rdb != nil {
			rdb.Close()
		}
		db.Close()
		return nil, err
	}
	var err error
	if pg {
		err = s.migratePostgres(ctx)
	} else {
		err = s.migrate(ctx)
	}
	if err != nil {
		return fail(err)
	}
	if s.inserts, err = prepareInserts(ctx, db); err != nil {
		return fail(err)
	}
	s.startCommitter()
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("the database has schema version %d; this corral knows up to %d: upgrade corral", v, schemaVersion)
	}
	if err := createTables(ctx, s.db); err != nil {
		return err
	}
	if err := s.migrateJobColumns(ctx); err != nil { // jobs_history.go
		return err
	}
	if err := s.migrateArraysDone(ctx); err != nil { // arrays_done.go
		return err
	}
	_, err := s.db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion))
	return err
}

// createTables runs every table's schema (each CREATE ... IF NOT EXISTS).
// A part that adds a table adds its schema here.
func createTables(ctx context.Context, db execer) error {
	for _, sc := range []string{schema, authSchema, historySchema, notifySchema, arraySchema, leaseSchema, bookingSchema, usageSchema, numberSchema, runsSchema} {
		if _, err := db.ExecContext(ctx, sc); err != nil {
			return err
		}
	}
	return nil
}

// execer is what *sql.DB and *sql.Tx share.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Close closes the database. Writes waiting to be committed fail with
// ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Lock()
		s.closed = true
		s.closing.Unlock()
		close(s.quit)
		<-s.stopped
		s.inserts.close()
		if s.rdb != nil {
			s.rdb.Close()
		}
	})
	return s.db.Close()
}

// JobEvent is one transition of one job.
type JobEvent struct {
	JobID string
	Event api.Event
}

// Batch is a set of changes committed together or not at all.
type Batch struct {
	Jobs        []api.Job // upserts; Events are not stored with the row
	Events      []JobEvent
	Holds       []api.Hold // upserts
	DeleteHolds []string
	Idempotency map[string]string // key -> job id
	Settings    map[string]string
	Nodes       map[string]string // node id -> its record (JSON)
	// Audit entries written with the batch (a submission's own entry,
	// so that the job and the record of who submitted it are durable
	// together, with one fsync).
	Audit []api.AuditEntry
	// Outbox holds the notifications the batch's changes cause (notify.go):
	// durable exactly when the changes are.
	Outbox []OutboxItem
	// Arrays are job arrays' records (upserts; arrays.go).
	Arrays []ArrayRecord
	// Bookings are bookings' records (upserts) and DeleteBookings
	// the names of bookings removed (bookings.go; table reservations).
	Bookings       []api.Reservation
	DeleteBookings []string
	// Usage are usage-ledger rows (upserts; usage.go), written with the
	// change that ends the attempts they charge.
	Usage []usage.Record
	// Ended are the jobs (not array tasks) that the batch ends, for the
	// summary of ended jobs (job_usage.go).
	Ended []EndedJob
	// Numbers are the short numbers the batch gives new jobs and arrays
	// (numbers.go): each number and each id once, ever.
	Numbers []NumberRow
	// Runs are the attempts the batch ends that ran to their own end
	// (runs.go), for the learned run times.
	Runs []RunRow
}

// Empty reports whether the batch changes nothing.
func (b *Batch) Empty() bool {
	return len(b.Jobs) == 0 && len(b.Events) == 0 && len(b.Holds) == 0 && len(b.DeleteHolds) == 0 &&
		len(b.Idempotency) == 0 && len(b.Settings) == 0 && len(b.Nodes) == 0 && len(b.Audit) == 0 &&
		len(b.Outbox) == 0 && len(b.Arrays) == 0 &&
		len(b.Bookings) == 0 && len(b.DeleteBookings) == 0 && len(b.Usage) == 0 && len(b.Ended) == 0 && len(b.Numbers) == 0 && len(b.Runs) == 0
}

// Commit writes the batch, all or nothing, and returns once it is durable.
// Batches committed concurrently (and audit entries) share one transaction
// and one fsync (group.go).
func (s *Store) Commit(ctx context.Context, b *Batch) error {
	if b.Empty() {
		return nil
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return b.write(ctx, tx, s.inserts) })
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// write writes the batch in tx, with the store's prepared inserts.
func (b *Batch) write(ctx context.Context, tx *sql.Tx, ins inserts) error {
	if len(b.Jobs) > 0 {
		args := make([]any, 0, insertJobs.ncols*len(b.Jobs))
		for _, j := range b.Jobs {
			j.Events = nil
			if err := checkJobTimes(&j); err != nil { // check.go: not a wrapped-around number
				return err
			}
			data, err := json.Marshal(j)
			if err != nil {
				return err
			}
			args = append(args, jobRow(&j, data)...) // jobs_history.go
		}
		if err := ins.insert(ctx, tx, insertJobs, args); err != nil {
			return err
		}
	}
	if len(b.Events) > 0 {
		args := make([]any, 0, 2*len(b.Events))
		for _, e := range b.Events {
			data, err := json.Marshal(e.Event)
			if err != nil {
				return err
			}
			args = append(args, e.JobID, string(data))
		}
		if err := ins.insert(ctx, tx, insertEvents, args); err != nil {
			return err
		}
	}
	for _, h := range b.Holds {
		data, err := json.Marshal(h)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO holds(job_id, data) VALUES(?,?)
			ON CONFLICT(job_id) DO UPDATE SET data=excluded.data`, h.JobID, string(data)); err != nil {
			return err
		}
	}
	for _, id := range b.DeleteHolds {
		if _, err := tx.ExecContext(ctx, `DELETE FROM holds WHERE job_id = ?`, id); err != nil {
			return err
		}
	}
	if len(b.Idempotency) > 0 {
		args := make([]any, 0, 2*len(b.Idempotency))
		for k, id := range b.Idempotency {
			args = append(args, k, id)
		}
		if err := ins.insert(ctx, tx, insertIdempotency, args); err != nil {
			return err
		}
	}
	for id, data := range b.Nodes {
		if _, err := tx.ExecContext(ctx, `INSERT INTO nodes(id, data) VALUES(?,?)
			ON CONFLICT(id) DO UPDATE SET data=excluded.data`, id, data); err != nil {
			return err
		}
	}
	for k, v := range b.Settings {
		if _, err := tx.ExecContext(ctx, `INSERT INTO settings(key, value) VALUES(?,?)
			ON CONFLICT(key) DO UPDATE SET value=excluded.value`, k, v); err != nil {
			return err
		}
	}
	if err := writeOutbox(ctx, tx, b.Outbox); err != nil {
		return err
	}
	if err := writeArrays(ctx, tx, b.Arrays); err != nil {
		return err
	}
	if err := writeBookings(ctx, tx, b.Bookings, b.DeleteBookings); err != nil {
		return err
	}
	if err := writeUsage(ctx, tx, ins, b.Usage); err != nil {
		return err
	}
	if err := writeEnded(ctx, tx, b.Ended); err != nil { // job_usage.go
		return err
	}
	if err := writeNumbers(ctx, tx, b.Numbers); err != nil { // numbers.go
		return err
	}
	if err := writeRuns(ctx, tx, ins, b.Runs); err != nil { // runs.go
		return err
	}
	return appendAudit(ctx, tx, ins, b.Audit)
}

// State is what the store holds that start-up reads.
type State struct {
	Jobs        []api.Job // jobs not finished, and the ended tasks of arrays not done: in id order, each with its events in order
	Holds       []api.Hold
	Idempotency map[string]string // the keys of the jobs in Jobs that are not finished
	Settings    map[string]string
	Nodes       map[string]string // node id -> record (JSON)
	Arrays      []ArrayRecord     // the records of the job arrays not done, in id order (arrays.go)
	// Bookings are the bookings, in name order (bookings.go).
	Bookings []api.Reservation
	// MaxNumber is the largest short number given so far (numbers.go);
	// the next job's is the one after it.
	MaxNumber int64
	// Runs are the most recent runs (DefaultLoadRuns of them), oldest
	// first (runs.go): the learned run times come back from them.
	Runs []RunRow
}

// Load reads what start-up needs: everything but finished jobs (and
// their events and idempotency keys).
func (s *Store) Load(ctx context.Context) (*State, error) {
	st := &State{Idempotency: map[string]string{}, Settings: map[string]string{}, Nodes: map[string]string{}}
	// Jobs not finished (and the ended tasks of arrays not done), with
	// their events and keys;
	// finished jobs are read on demand (jobs_history.go).
	if err := s.loadLive(ctx, st); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	err := s.each(ctx, `SELECT data FROM holds ORDER BY job_id`, func(r *sql.Rows) error {
		var data string
		var h api.Hold
		if err := r.Scan(&data); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(data), &h); err != nil {
			return fmt.Errorf("hold row: %w", err)
		}
		st.Holds = append(st.Holds, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.each(ctx, `SELECT id, data FROM nodes ORDER BY id`, func(r *sql.Rows) error {
		var id, data string
		if err := r.Scan(&id, &data); err != nil {
			return err
		}
		st.Nodes[id] = data
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.each(ctx, `SELECT key, value FROM settings`, func(r *sql.Rows) error {
		var k, v string
		if err := r.Scan(&k, &v); err != nil {
			return err
		}
		st.Settings[k] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.loadArrays(ctx, st); err != nil {
		return nil, err
	}
	if err := s.loadBookings(ctx, st); err != nil {
		return nil, err
	}
	if st.MaxNumber, err = s.maxNumber(ctx); err != nil { // numbers.go
		return nil, err
	}
	if st.Runs, err = s.loadRuns(ctx, DefaultLoadRuns); err != nil { // runs.go
		return nil, err
	}
	return st, nil
}

func (s *Store) each(ctx context.Context, query string, fn func(*sql.Rows) error) error {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// ErrLocked is returned by Lock when another process holds the data dir.
var ErrLocked = errors.New("data dir is in use by another corral process")
