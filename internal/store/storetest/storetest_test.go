package storetest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/store/storetest"
)

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), "corral.db")
		return func(ctx context.Context) (*store.Store, error) { return store.Open(ctx, path) }
	})
}

func TestPostgres(t *testing.T) {
	storetest.Postgres(t) // skips the whole suite when there is no server
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dsn := storetest.Postgres(t)
		return func(ctx context.Context) (*store.Store, error) { return store.OpenPostgres(ctx, dsn) }
	})
}

// TestPostgresReopenBesideWriter: a server opening a database that is
// already at this corral's layout (a follower coming back beside a
// leader) runs no DDL, so it neither waits for nor blocks the leader's
// open write transactions (ALTER TABLE and CREATE INDEX take their table's
// strongest locks even when there is nothing to do, and deadlocked a
// leader's commit in a fail-over run).
func TestPostgresReopenBesideWriter(t *testing.T) {
	dsn := storetest.Postgres(t)
	ctx := context.Background()
	first, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// The leader's write, open: a row lock on jobs and audit (RowExclusiveLock on the tables).
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit(at, "user", action, data) VALUES(1, 'u', 'a', '{}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET name = name WHERE id = 'none'`); err != nil {
		t.Fatal(err)
	}
	openCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	second, err := store.OpenPostgres(openCtx, dsn)
	if err != nil {
		t.Fatalf("opening the store beside an open write transaction: %v (it waited on the writer's tables)", err)
	}
	second.Close()
}
