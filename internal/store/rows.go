package store

import (
	"context"
	"database/sql"
	"strings"
)

// maxRowsPerInsert bounds the rows of one INSERT statement (SQLite allows
// 32,766 parameters in one; five columns of 64 rows is 320).
const maxRowsPerInsert = 64

// insertRows inserts rows of ncols values each (args holds them one row
// after the other) with as few statements as it may: one INSERT of up to
// maxRowsPerInsert rows each. head is "INSERT INTO t(a, b)", tail what
// follows the values (an ON CONFLICT clause, or ""). Rows are inserted in
// order, so an AUTOINCREMENT key follows args. One statement for many
// rows costs SQLite much less than one per row: it opens the table's and
// indexes' cursors, and updates the AUTOINCREMENT counter, once.
func insertRows(ctx context.Context, tx *sql.Tx, head string, ncols int, tail string, args []any) error {
	rows := len(args) / ncols
	for start := 0; start < rows; start += maxRowsPerInsert {
		n := min(maxRowsPerInsert, rows-start)
		if _, err := tx.ExecContext(ctx, insertSQL(head, ncols, n, tail), args[start*ncols:(start+n)*ncols]...); err != nil {
			return err
		}
	}
	return nil
}

// insertSQL is head VALUES(?,..),(?,..)... tail, for n rows of ncols.
func insertSQL(head string, ncols, n int, tail string) string {
	row := "(" + strings.Repeat("?,", ncols-1) + "?)"
	var b strings.Builder
	b.Grow(len(head) + 8 + n*(len(row)+1) + len(tail))
	b.WriteString(head)
	b.WriteString(" VALUES")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	return b.String()
}
