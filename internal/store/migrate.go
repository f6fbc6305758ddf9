package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// copyRows is how many rows one INSERT of Copy carries.
const copyRows = 200

// ErrNotEmpty is returned by Copy when the target holds data and force is
// not set.
var ErrNotEmpty = errors.New("the target store is not empty")

// CopyProgress is called by Copy as it goes: after each batch of rows of
// a table (done of total), and once per table when it is finished.
type CopyProgress func(table string, done, total int64)

// Copy copies every table of from into to (both open, so both hold this
// corral's tables), in one transaction on the target: all of it or none.
// A target holding any row is refused with ErrNotEmpty unless force is
// set, in which case its rows are deleted first (in the same
// transaction). Rows keep their keys (seq numbers included) and their
// order; identity counters on PostgreSQL are moved past the copied keys.
// from must not be written to during the copy (stop its server).
func Copy(ctx context.Context, from, to *Store, force bool, progress CopyProgress) error {
	if progress == nil {
		progress = func(string, int64, int64) {}
	}
	tables, err := from.tables(ctx)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	have, err := to.tables(ctx)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	targets := map[string]bool{}
	for _, t := range have {
		targets[t] = true
	}
	for _, t := range tables {
		if !targets[t] {
			return fmt.Errorf("copy: table %s is not in the target (is it the same corral version?)", t)
		}
	}
	nonEmpty := ""
	for _, t := range have {
		n, err := count(ctx, to.db, t)
		if err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		if n > 0 {
			nonEmpty = t
			break
		}
	}
	if nonEmpty != "" && !force {
		return fmt.Errorf("copy: %w (table %s has rows)", ErrNotEmpty, nonEmpty)
	}
	tx, err := to.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer tx.Rollback()
	if nonEmpty != "" {
		for _, t := range have {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+t); err != nil {
				return fmt.Errorf("copy: empty %s: %w", t, err)
			}
		}
	}
	for _, t := range tables {
		if err := copyTable(ctx, from, tx, t, progress); err != nil {
			return fmt.Errorf("copy %s: %w", t, err)
		}
	}
	if to.pg {
		if err := resetIdentities(ctx, tx); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	return nil
}

// tables lists the store's data tables (not its schema version), sorted.
func (s *Store) tables(ctx context.Context) ([]string, error) {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`
	if s.pg {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'schema_version' ORDER BY table_name`
	}
	var out []string
	err := s.each(ctx, q, func(r *sql.Rows) error {
		var n string
		if err := r.Scan(&n); err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	return out, err
}

func count(ctx context.Context, db *sql.DB, table string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n)
	return n, err
}

// copyTable copies one table's rows, in insertion (rowid) order, into tx.
// PostgreSQL's rowid column (dialect.go) is not copied: the target makes
// its own, in the same order.
func copyTable(ctx context.Context, from *Store, tx *sql.Tx, table string, progress CopyProgress) error {
	total, err := count(ctx, from.db, table)
	if err != nil {
		return err
	}
	rows, err := from.db.QueryContext(ctx, "SELECT * FROM "+table+" ORDER BY rowid")
	if err != nil {
		return err
	}
	defer rows.Close()
	all, err := rows.Columns()
	if err != nil {
		return err
	}
	var cols []int // the indexes of the columns copied
	var names []string
	for i, c := range all {
		if !strings.EqualFold(c, "rowid") {
			cols = append(cols, i)
			names = append(names, c)
		}
	}
	head := "INSERT INTO " + table + "(" + strings.Join(names, ", ") + ") VALUES"
	row := "(" + strings.Repeat("?,", len(names)-1) + "?)"
	vals := make([]any, len(all))
	ptrs := make([]any, len(all))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var args []any
	var pending, done int64
	flush := func() error {
		if pending == 0 {
			return nil
		}
		q := head + strings.TrimSuffix(strings.Repeat(row+",", int(pending)), ",")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		done += pending
		progress(table, done, total)
		args, pending = args[:0], 0
		return nil
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for _, i := range cols {
			args = append(args, vals[i])
		}
		if pending++; pending == copyRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if done == 0 {
		progress(table, 0, 0)
	}
	return nil
}

// resetIdentities moves each identity column's counter past the largest
// key copied, so that the next row inserted gets a new one.
func resetIdentities(ctx context.Context, tx *sql.Tx) error {
	type col struct{ table, column string }
	var cols []col
	rows, err := tx.QueryContext(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND is_identity = 'YES'`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.table, &c.column); err != nil {
			rows.Close()
			return err
		}
		cols = append(cols, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range cols {
		q := fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s', '%s'), COALESCE(MAX(%s), 0) + 1, false) FROM %s`,
			c.table, c.column, c.column, c.table)
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("identity %s.%s: %w", c.table, c.column, err)
		}
	}
	return nil
}
