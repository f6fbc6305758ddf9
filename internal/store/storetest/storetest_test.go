package storetest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
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

// TestPostgresMigrateArraysDone: a PostgreSQL store of schema version 5
// (no arrays.finished; array tasks out of the summary of ended jobs)
// opened by this corral marks the arrays whose tasks all ended done and
// counts their tasks, once; an array with a task that never changed is
// not done.
func TestPostgresMigrateArraysDone(t *testing.T) {
	dsn := storetest.Postgres(t)
	ctx := context.Background()
	s, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &store.Batch{}
	for _, id := range []string{"ad", "al"} {
		b.Arrays = append(b.Arrays, store.ArrayRecord{Array: api.Array{ID: id, User: "ana", Array: "0-1", TaskCount: 2, Tasks: []int{0, 1}, Priority: api.PriorityNormal},
			Template: api.Job{Priority: api.PriorityNormal}})
	}
	for _, id := range []string{"ad_0", "ad_1", "al_0"} {
		end := at
		b.Jobs = append(b.Jobs, api.Job{ID: id, ArrayJobID: id[:2], User: "ana", State: api.StateCompleted, Priority: api.PriorityNormal, FinishedAt: &end})
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`DROP INDEX arrays_by_finished`, `DROP INDEX jobs_by_array`, `ALTER TABLE arrays DROP COLUMN finished`, `UPDATE schema_version SET version = 5`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for range 2 { // the second open changes nothing
		s, err := store.OpenPostgres(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Load(ctx)
		if err != nil || len(st.Arrays) != 1 || st.Arrays[0].Array.ID != "al" || len(st.Jobs) != 1 || st.Jobs[0].ID != "al_0" {
			t.Fatalf("Load = %+v, %v: want array al and its task al_0 only", st, err)
		}
		if n, err := s.CountFinished(ctx); err != nil || n[api.StateCompleted] != 2 {
			t.Fatalf("CountFinished = %v, %v: want ad's two tasks", n, err)
		}
		s.Close()
	}
}

func TestSQLiteLog(t *testing.T) {
	storetest.RunLog(t, func(t *testing.T) storetest.Log {
		s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "corral.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestPostgresLog(t *testing.T) {
	storetest.Postgres(t) // skips when there is no server
	storetest.RunLog(t, func(t *testing.T) storetest.Log {
		s, err := store.OpenPostgres(context.Background(), storetest.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
