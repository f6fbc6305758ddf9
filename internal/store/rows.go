package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// maxRowsPerInsert bounds the rows of one INSERT statement (SQLite allows
// 32,766 parameters in one; eleven columns of 64 rows is 704).
const maxRowsPerInsert = 64

// insertSpec is a multi-row INSERT: head is "INSERT INTO t(a, b)", tail
// what follows the values (an ON CONFLICT clause, or "").
type insertSpec struct {
	head  string
	ncols int
	tail  string
}

// The batch tables' inserts.
var (
	insertJobs = insertSpec{`INSERT INTO jobs(id, state, user, project, data, name, submitted, started, finished, gpu_seconds, array_id)`, 11,
		` ON CONFLICT(id) DO UPDATE SET state=excluded.state, data=excluded.data, started=excluded.started, finished=excluded.finished, gpu_seconds=excluded.gpu_seconds`}
	insertEvents      = insertSpec{`INSERT INTO events(job_id, data)`, 2, ""}
	insertIdempotency = insertSpec{`INSERT INTO idempotency(key, job_id)`, 2, ""}
	insertAudit       = insertSpec{`INSERT INTO audit(at, user, action, data)`, 4, ""}
)

// inserts holds each spec's statements prepared once, at Open, for 1, 2,
// 4, ... maxRowsPerInsert rows: a transaction uses them without parsing.
// They are prepared on the store's one connection before the committer
// starts (preparing one while a transaction holds that connection would
// wait for it forever).
type inserts map[insertSpec][]*sql.Stmt // by log2 of the rows

func prepareInserts(ctx context.Context, db *sql.DB) (inserts, error) {
	ins := inserts{}
	for _, sp := range []insertSpec{insertJobs, insertEvents, insertIdempotency, insertAudit, insertUsage, insertRuns} {
		for n := 1; n <= maxRowsPerInsert; n *= 2 {
			st, err := db.PrepareContext(ctx, sp.sql(n))
			if err != nil {
				ins.close()
				return nil, fmt.Errorf("prepare %s: %w", sp.head, err)
			}
			ins[sp] = append(ins[sp], st)
		}
	}
	return ins, nil
}

func (ins inserts) close() {
	for _, sts := range ins {
		for _, st := range sts {
			st.Close()
		}
	}
}

// insert inserts rows of sp.ncols values each (args holds them one row
// after the other), in order (an AUTOINCREMENT key follows args), with as
// few statements as the prepared sizes allow: 64 rows at a time, then the
// rest by powers of two. One statement for many rows costs SQLite much
// less than one per row: it opens the table's and indexes' cursors, and
// updates the AUTOINCREMENT counter, once.
func (ins inserts) insert(ctx context.Context, tx *sql.Tx, sp insertSpec, args []any) error {
	sts := ins[sp]
	rows := len(args) / sp.ncols
	for rows > 0 {
		k := len(sts) - 1 // the largest size that fits the rows left
		for 1<<k > rows {
			k--
		}
		n := 1 << k
		if _, err := tx.StmtContext(ctx, sts[k]).ExecContext(ctx, args[:n*sp.ncols]...); err != nil {
			return err
		}
		args, rows = args[n*sp.ncols:], rows-n
	}
	return nil
}

// sql is head VALUES(?,..),(?,..)... tail, for n rows.
func (sp insertSpec) sql(n int) string {
	row := "(" + strings.Repeat("?,", sp.ncols-1) + "?)"
	var b strings.Builder
	b.WriteString(sp.head)
	b.WriteString(" VALUES")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(sp.tail)
	return b.String()
}

// placeholders is n SQL parameters, comma-separated.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// anys is ids as a query's arguments.
func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// notIn adds to query, whose WHERE clause args fill, that col is none of
// ids (nothing when there are none).
func notIn(query string, args []any, col string, ids []string) (string, []any) {
	if len(ids) == 0 {
		return query, args
	}
	return query + ` AND ` + col + ` NOT IN (` + placeholders(len(ids)) + `)`, append(args, anys(ids)...)
}
