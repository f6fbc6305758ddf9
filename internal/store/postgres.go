package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/corral-sched/corral/internal/lazyre"
)

// pgMigrateLock is the key of the transaction-scoped advisory lock that
// keeps two servers starting on one PostgreSQL database from creating its
// tables at once (released at COMMIT; no session lock is ever taken).
const pgMigrateLock = 7450_0001

// migratePostgres creates or upgrades the tables, in one transaction. The
// schema version, PRAGMA user_version on SQLite, is the one row of the
// table schema_version.
func (s *Store) migratePostgres(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, pgMigrateLock); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("the database has schema version %d; this corral knows up to %d: upgrade corral", v, schemaVersion)
	}
	// A database this corral made already is left alone: DDL on a live
	// database (CREATE INDEX IF NOT EXISTS, ALTER TABLE ... IF NOT
	// EXISTS) takes its table's strongest locks before it finds there is
	// nothing to do, and a server starting beside a leader (a follower
	// coming back) would block the leader's writes and deadlock with them.
	if v == schemaVersion {
		complete, err := pgSchemaComplete(ctx, tx)
		if err != nil {
			return err
		}
		if complete {
			return tx.Commit()
		}
	}
	if err := createTables(ctx, tx); err != nil {
		return err
	}
	// Version 5's columns and indexes of jobs, and the summary of ended
	// jobs (jobs_history.go, job_usage.go): ADD COLUMN IF NOT EXISTS is
	// PostgreSQL's, so a store copied from an older SQLite one gets them.
	for _, c := range jobColumns {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE jobs ADD COLUMN IF NOT EXISTS `+c.name+` `+c.decl); err != nil {
			return fmt.Errorf("add column jobs.%s: %w", c.name, err)
		}
	}
	if err := backfillEnded(ctx, tx, true); err != nil { // jobs_history.go
		return err
	}
	for _, sc := range []string{jobsHistorySchema, jobUsageSchema} {
		if _, err := tx.ExecContext(ctx, sc); err != nil {
			return err
		}
	}
	// Version 6: done arrays out of memory (arrays_done.go).
	if _, err := tx.ExecContext(ctx, `ALTER TABLE arrays ADD COLUMN IF NOT EXISTS finished BIGINT NOT NULL DEFAULT 0`); err != nil {
		return fmt.Errorf("add column arrays.finished: %w", err)
	}
	if _, err := tx.ExecContext(ctx, arraysDoneSchema); err != nil {
		return err
	}
	if v < 6 {
		if err := fillArraysDone(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version(version) VALUES(?)`, schemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}

// OpenURL opens the store that spec names, as --store takes it:
//
//	""                     the SQLite file defaultPath (corral.db in the data dir)
//	sqlite://PATH          the SQLite file PATH (sqlite:///abs/path, or sqlite://rel/path)
//	postgres://… postgresql://…   a PostgreSQL database (OpenPostgres)
//
// Anything else is an error naming the accepted forms.
func OpenURL(ctx context.Context, spec, defaultPath string) (*Store, error) {
	kind, target, err := ParseURL(spec, defaultPath)
	if err != nil {
		return nil, err
	}
	if kind == "postgres" {
		return OpenPostgres(ctx, target)
	}
	return Open(ctx, target)
}

// ParseURL says which kind of store spec names ("sqlite" or "postgres")
// and its target (a file path, or the PostgreSQL connection string), as
// OpenURL reads it.
func ParseURL(spec, defaultPath string) (kind, target string, err error) {
	switch {
	case spec == "":
		return "sqlite", defaultPath, nil
	case strings.HasPrefix(spec, "sqlite://"):
		p := strings.TrimPrefix(spec, "sqlite://")
		if p == "" {
			return "", "", fmt.Errorf("store %q: no file path after sqlite://", spec)
		}
		return "sqlite", filepath.Clean(p), nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		if _, err := url.Parse(spec); err != nil {
			return "", "", fmt.Errorf("store %s: %w", redact(spec), err)
		}
		return "postgres", spec, nil
	}
	return "", "", fmt.Errorf("store %q: want sqlite://PATH or postgres://USER@HOST:PORT/DB", redact(spec))
}

// Postgres reports whether the store is on PostgreSQL.
func (s *Store) Postgres() bool { return s.pg }

// redact is dsn with its password, if any, replaced by xxxxx, for errors
// and logs.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); !ok {
		return dsn
	}
	return u.Redacted()
}

// schemaObject matches the tables and indexes the schemas create.
var schemaObject = lazyre.New(`(?i)CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\w+)`)

// pgSchemaComplete reports whether every table, index and jobs column
// this corral's schemas make exists already, from the catalog alone
// (no lock on any table).
func pgSchemaComplete(ctx context.Context, tx *sql.Tx) (bool, error) {
	var names []string
	for _, sc := range []string{schema, authSchema, historySchema, notifySchema, arraySchema, leaseSchema, bookingSchema, usageSchema, numberSchema, jobsHistorySchema, jobUsageSchema, arraysDoneSchema, runsSchema} {
		for _, m := range schemaObject.FindAllStringSubmatch(sc, -1) {
			names = append(names, m[1])
		}
	}
	for _, n := range names {
		var found sql.NullString
		if err := tx.QueryRowContext(ctx, `SELECT to_regclass(?)::text`, n).Scan(&found); err != nil {
			return false, err
		}
		if !found.Valid {
			return false, nil
		}
	}
	for _, c := range jobColumns {
		var k int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'jobs' AND column_name = ?`, c.name).Scan(&k); err != nil {
			return false, err
		}
		if k == 0 {
			return false, nil
		}
	}
	return true, nil
}
