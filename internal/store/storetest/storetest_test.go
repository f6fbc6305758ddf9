package storetest_test

import (
	"context"
	"path/filepath"
	"testing"

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
