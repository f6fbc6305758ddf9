package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/store"
)

// NewStoreCmd is `corral store`: the database itself, offline.
func NewStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Work on the database itself (offline): migrate it from SQLite to PostgreSQL",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newStoreMigrateCmd())
	return cmd
}

func newStoreMigrateCmd() *cobra.Command {
	var from, to string
	var force bool
	cmd := &cobra.Command{
		Use:   "migrate --from sqlite://PATH --to postgres://USER@HOST:PORT/DB [--force]",
		Short: "Copy everything from one store into another (every table, in one transaction)",
		Long: `corral store migrate copies every table of one store into another: jobs and
their events, holds, nodes, settings, tokens, the audit trail, notification
endpoints and outbox, history, arrays, and whatever else the store holds. The
target's tables are made when needed; the copy is one transaction, so a copy
that fails leaves the target as it was.

A target that already holds data is refused unless --force, which deletes it
first. Stop every server using either store first: a SQLite store in use by a
server is refused (its data dir is locked); PostgreSQL cannot be checked.
Progress goes to stderr.`,
		Example: `  corral store migrate --from sqlite:///var/lib/corral/corral.db --to postgres://corral@db:5432/corral
  corral server --store postgres://corral@db:5432/corral`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStoreMigrate(cmd.Context(), from, to, force, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "the store to copy: sqlite://PATH or postgres://… (required)")
	fl.StringVar(&to, "to", "", "the store to copy into: postgres://… or sqlite://PATH (required)")
	fl.BoolVar(&force, "force", false, "delete what the target holds before the copy")
	return cmd
}

func runStoreMigrate(ctx context.Context, from, to string, force bool, stdout, stderr io.Writer) error {
	if from == "" || to == "" {
		return cmdkit.Usagef("--from and --to are both required (sqlite://PATH or postgres://USER@HOST:PORT/DB)")
	}
	if from == to {
		return cmdkit.Usagef("--from and --to name the same store")
	}
	fromKind, fromTarget, err := store.ParseURL(from, "")
	if err != nil {
		return cmdkit.Usagef("--from: %v", err)
	}
	toKind, toTarget, err := store.ParseURL(to, "")
	if err != nil {
		return cmdkit.Usagef("--to: %v", err)
	}
	if fromKind == "sqlite" {
		if _, err := os.Stat(fromTarget); err != nil {
			return fmt.Errorf("--from: %w", err)
		}
	}
	// A SQLite store's data dir is locked by the server using it.
	for _, s := range []struct{ kind, path string }{{fromKind, fromTarget}, {toKind, toTarget}} {
		if s.kind != "sqlite" {
			continue
		}
		release, err := store.Lock(filepath.Dir(s.path))
		if err != nil {
			return fmt.Errorf("stop the server using it first: %w", err)
		}
		defer release()
	}
	src, err := store.OpenURL(ctx, from, "")
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer src.Close()
	dst, err := store.OpenURL(ctx, to, "")
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	defer dst.Close()

	start := time.Now()
	var last time.Time
	var rows int64
	tables := 0
	progress := func(table string, done, total int64) {
		if done == total {
			tables++
			rows += total
		}
		if done == total || time.Since(last) >= time.Second {
			fmt.Fprintf(stderr, "%s: %d/%d rows\n", table, done, total)
			last = time.Now()
		}
	}
	if err := store.Copy(ctx, src, dst, force, progress); err != nil {
		if errors.Is(err, store.ErrNotEmpty) {
			return fmt.Errorf("--to: %w; --force deletes what it holds first", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "copied %d rows of %d tables in %s\n", rows, tables, time.Since(start).Round(time.Millisecond))
	return nil
}
