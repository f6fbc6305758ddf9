package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/usage"
)

// usageSchema is the usage ledger: one row per attempt and
// node (and per hold, and per booked-but-idle occurrence), written in the
// orchestrator's Batch with the change that ends the attempt. Times are
// nanoseconds since the epoch. (kind, id, attempt, node) is a row's
// identity: a row written again replaces itself, so nothing counts twice.
const usageSchema = `
CREATE TABLE IF NOT EXISTS usage (
	kind TEXT NOT NULL,
	id TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	node TEXT NOT NULL,
	user_name TEXT NOT NULL,
	project TEXT NOT NULL,
	gpu_model TEXT NOT NULL,
	gpus INTEGER NOT NULL,
	start_ns BIGINT NOT NULL,
	end_ns BIGINT NOT NULL,
	gpu_seconds DOUBLE PRECISION NOT NULL,
	used_gpu_seconds DOUBLE PRECISION NOT NULL,
	ended TEXT NOT NULL,
	PRIMARY KEY (kind, id, attempt, node)
);
CREATE INDEX IF NOT EXISTS usage_end ON usage(end_ns);
`

// insertUsage is the ledger's multi-row upsert (rows.go).
var insertUsage = insertSpec{`INSERT INTO usage(kind, id, attempt, node, user_name, project, gpu_model, gpus, start_ns, end_ns, gpu_seconds, used_gpu_seconds, ended)`, 13,
	` ON CONFLICT(kind, id, attempt, node) DO UPDATE SET user_name=excluded.user_name, project=excluded.project,
	gpu_model=excluded.gpu_model, gpus=excluded.gpus, start_ns=excluded.start_ns, end_ns=excluded.end_ns,
	gpu_seconds=excluded.gpu_seconds, used_gpu_seconds=excluded.used_gpu_seconds, ended=excluded.ended`}

// writeUsage upserts ledger rows in tx, many per statement.
func writeUsage(ctx context.Context, tx *sql.Tx, ins inserts, recs []usage.Record) error {
	if len(recs) == 0 {
		return nil
	}
	args := make([]any, 0, 13*len(recs))
	for _, r := range recs {
		if err := checkNanos("usage of "+r.ID, r.Start, r.End); err != nil { // check.go
			return err
		}
		args = append(args, r.Kind, r.ID, r.Attempt, r.Node, r.User, r.Project, r.GPUModel, r.GPUs,
			r.Start.UnixNano(), r.End.UnixNano(), r.GPUSeconds, r.UsedGPUSeconds, r.Ended)
	}
	if err := ins.insert(ctx, tx, insertUsage, args); err != nil {
		return fmt.Errorf("usage rows: %w", err)
	}
	return nil
}

// UsageRecords reads the ledger rows that overlap [since, until) (a zero
// bound is open), in the order they ended. It reads the database, not
// memory: callers are reports, and the orchestrator once at start-up.
func (s *Store) UsageRecords(ctx context.Context, since, until time.Time) ([]usage.Record, error) {
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if !since.IsZero() {
		lo = since.UnixNano()
	}
	if !until.IsZero() {
		hi = until.UnixNano()
	}
	rows, err := s.db.QueryContext(ctx, `SELECT kind, id, attempt, node, user_name, project, gpu_model, gpus, start_ns, end_ns, gpu_seconds, used_gpu_seconds, ended
		FROM usage WHERE end_ns >= ? AND start_ns < ? ORDER BY end_ns, kind, id, attempt, node`, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	defer rows.Close()
	out := []usage.Record{}
	for rows.Next() {
		var r usage.Record
		var start, end int64
		if err := rows.Scan(&r.Kind, &r.ID, &r.Attempt, &r.Node, &r.User, &r.Project, &r.GPUModel, &r.GPUs,
			&start, &end, &r.GPUSeconds, &r.UsedGPUSeconds, &r.Ended); err != nil {
			return nil, fmt.Errorf("usage: %w", err)
		}
		r.Start, r.End = time.Unix(0, start).UTC(), time.Unix(0, end).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return out, nil
}

// UsageTotal is the ledger's all-time GPU-seconds of one user, project
// and GPU model.
type UsageTotal struct {
	User, Project, GPUModel string
	GPUSeconds              float64
}

// UsageTotals sums the whole ledger by user, project and GPU model, in one
// query (read at start-up for the all-time counters).
func (s *Store) UsageTotals(ctx context.Context) ([]UsageTotal, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT user_name, project, gpu_model, SUM(gpu_seconds) FROM usage GROUP BY user_name, project, gpu_model`)
	if err != nil {
		return nil, fmt.Errorf("usage totals: %w", err)
	}
	defer rows.Close()
	var out []UsageTotal
	for rows.Next() {
		var t UsageTotal
		if err := rows.Scan(&t.User, &t.Project, &t.GPUModel, &t.GPUSeconds); err != nil {
			return nil, fmt.Errorf("usage totals: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage totals: %w", err)
	}
	return out, nil
}
