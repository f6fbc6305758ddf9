package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// notifySchema holds notification endpoints and the outbox.
//
// Endpoints are written directly (like tokens): they are not live
// scheduling state. Their data is JSON whose URL, secret and address
// fields are sealed by package notify before they reach the store.
//
// The outbox is written two ways: rows caused by a job's change come in
// the orchestrator's Batch (Batch.Outbox), so they are durable exactly
// when the change is; the sender then updates each row's delivery state
// directly (UpdateOutbox). A row stays "pending" until it is delivered or
// given up ("failed"), so a server killed at any moment re-reads every
// undelivered row at its next start.
const notifySchema = `
CREATE TABLE IF NOT EXISTS notify_endpoints (
	id TEXT PRIMARY KEY,
	data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	endpoint_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	created_at TEXT NOT NULL,
	state TEXT NOT NULL,
	next_at TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	digest INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	delivered_at TEXT NOT NULL DEFAULT '',
	data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox(state, next_at, seq);
CREATE INDEX IF NOT EXISTS outbox_endpoint ON outbox(endpoint_id, seq);
CREATE TABLE IF NOT EXISTS notify_defaults (
	user TEXT PRIMARY KEY,
	data TEXT NOT NULL
);
`

// Outbox row states.
const (
	OutboxPending   = "pending"   // not delivered yet; the sender will try (again)
	OutboxDelivered = "delivered" // the endpoint accepted it
	OutboxFailed    = "failed"    // given up: retries ran out, or the endpoint is gone
)

// OutboxItem is one notification for one endpoint.
type OutboxItem struct {
	Seq         int64     // assigned by the store
	EndpointID  string    // the endpoint it goes to
	Kind        string    // what happened (notify.Kind)
	CreatedAt   time.Time // when the change that caused it was made
	State       string    // OutboxPending, OutboxDelivered or OutboxFailed
	NextAt      time.Time // not tried before this
	Attempts    int
	Digest      int64 // non-zero: sent within the digest of this seq (its first row's)
	LastError   string
	DeliveredAt time.Time // zero until delivered
	Data        string    // the event, JSON
}

// OutboxUpdate is the sender's change to one row.
type OutboxUpdate struct {
	Seq         int64
	State       string
	NextAt      time.Time
	Attempts    int
	Digest      int64
	LastError   string
	DeliveredAt time.Time
}

// EndpointRecord is one stored notification endpoint: its id and its
// JSON (with its secrets already sealed).
type EndpointRecord struct {
	ID   string
	Data string
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(auditTime)
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, _ := time.Parse(auditTime, s)
	return t
}

// writeOutbox inserts rows in tx.
func writeOutbox(ctx context.Context, tx *sql.Tx, items []OutboxItem) error {
	for _, it := range items {
		state := it.State
		if state == "" {
			state = OutboxPending
		}
		next := it.NextAt
		if next.IsZero() {
			next = it.CreatedAt
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox(endpoint_id, kind, created_at, state, next_at, attempts, digest, last_error, delivered_at, data)
			VALUES(?,?,?,?,?,?,?,?,?,?)`, it.EndpointID, it.Kind, fmtTime(it.CreatedAt), state, fmtTime(next),
			it.Attempts, it.Digest, it.LastError, fmtTime(it.DeliveredAt), it.Data); err != nil {
			return err
		}
	}
	return nil
}

// AppendOutbox adds rows to the outbox (notifications not caused by a
// batch: alerts raised outside the orchestrator's loop) and returns once
// they are durable.
func (s *Store) AppendOutbox(ctx context.Context, items ...OutboxItem) error {
	if len(items) == 0 {
		return nil
	}
	if err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return writeOutbox(ctx, tx, items) }); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// UpdateOutbox records delivery outcomes, all in one transaction.
func (s *Store) UpdateOutbox(ctx context.Context, us ...OutboxUpdate) error {
	if len(us) == 0 {
		return nil
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, u := range us {
			if _, err := tx.ExecContext(ctx, `UPDATE outbox SET state=?, next_at=?, attempts=?, digest=?, last_error=?, delivered_at=? WHERE seq=?`,
				u.State, fmtTime(u.NextAt), u.Attempts, u.Digest, u.LastError, fmtTime(u.DeliveredAt), u.Seq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

const outboxColumns = `seq, endpoint_id, kind, created_at, state, next_at, attempts, digest, last_error, delivered_at, data`

func scanOutbox(r *sql.Rows) (OutboxItem, error) {
	var it OutboxItem
	var created, next, delivered string
	err := r.Scan(&it.Seq, &it.EndpointID, &it.Kind, &created, &it.State, &next, &it.Attempts, &it.Digest, &it.LastError, &delivered, &it.Data)
	it.CreatedAt, it.NextAt, it.DeliveredAt = parseTime(created), parseTime(next), parseTime(delivered)
	return it, err
}

// PendingOutbox returns up to limit undelivered rows, the soonest due
// first.
func (s *Store) PendingOutbox(ctx context.Context, limit int) ([]OutboxItem, error) {
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE state = ? ORDER BY next_at, seq LIMIT ?`, OutboxPending, limit)
}

// DueOutbox returns up to limit undelivered rows due at now (next_at not
// after it), the soonest due first, leaving out the rows of the endpoints
// in skip (those with a delivery under way).
func (s *Store) DueOutbox(ctx context.Context, now time.Time, skip []string, limit int) ([]OutboxItem, error) {
	q, args := notIn(`SELECT `+outboxColumns+` FROM outbox WHERE state = ? AND next_at <= ?`, []any{OutboxPending, fmtTime(now)}, "endpoint_id", skip)
	q += ` ORDER BY next_at, seq LIMIT ?`
	return s.queryOutbox(ctx, q, append(args, limit)...)
}

// NextOutbox returns when the soonest undelivered row not yet due at now
// falls due; false when there is none.
func (s *Store) NextOutbox(ctx context.Context, now time.Time) (time.Time, bool, error) {
	var next sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT MIN(next_at) FROM outbox WHERE state = ? AND next_at > ?`, OutboxPending, fmtTime(now)).Scan(&next)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("outbox: %w", err)
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	return parseTime(next.String), true, nil
}

// OutboxFilter selects outbox rows for the delivery log; zero fields match
// everything.
type OutboxFilter struct {
	Endpoints []string // only rows of these endpoints; nil: every endpoint
	State     string
	Before    int64 // only rows with a smaller seq (paging)
	Limit     int   // default 100
}

// Outbox returns outbox rows, newest first.
func (s *Store) Outbox(ctx context.Context, f OutboxFilter) ([]OutboxItem, error) {
	var where []string
	var args []any
	if f.Endpoints != nil {
		if len(f.Endpoints) == 0 {
			return []OutboxItem{}, nil
		}
		where, args = append(where, "endpoint_id IN ("+placeholders(len(f.Endpoints))+")"), append(args, anys(f.Endpoints)...)
	}
	if f.State != "" {
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	if f.Before > 0 {
		where, args = append(where, "seq < ?"), append(args, f.Before)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q := `SELECT ` + outboxColumns + ` FROM outbox`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT ?"
	return s.queryOutbox(ctx, q, append(args, f.Limit)...)
}

func (s *Store) queryOutbox(ctx context.Context, q string, args ...any) ([]OutboxItem, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	defer rows.Close()
	out := []OutboxItem{}
	for rows.Next() {
		it, err := scanOutbox(rows)
		if err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// PutEndpoint inserts or replaces an endpoint.
func (s *Store) PutEndpoint(ctx context.Context, e EndpointRecord) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO notify_endpoints(id, data) VALUES(?,?)
			ON CONFLICT(id) DO UPDATE SET data=excluded.data`, e.ID, e.Data)
		return err
	})
	if err != nil {
		return fmt.Errorf("put endpoint: %w", err)
	}
	return nil
}

// DeleteEndpoint removes an endpoint; its undelivered rows are marked
// failed in the same transaction.
func (s *Store) DeleteEndpoint(ctx context.Context, id string) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM notify_endpoints WHERE id = ?`, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE outbox SET state = ?, last_error = 'the endpoint was removed' WHERE endpoint_id = ? AND state = ?`,
			OutboxFailed, id, OutboxPending)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete endpoint: %w", err)
	}
	return nil
}

// Endpoints reads every endpoint, oldest first.
func (s *Store) Endpoints(ctx context.Context) ([]EndpointRecord, error) {
	var out []EndpointRecord
	err := s.each(ctx, `SELECT id, data FROM notify_endpoints ORDER BY rowid`, func(r *sql.Rows) error {
		var e EndpointRecord
		if err := r.Scan(&e.ID, &e.Data); err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// PruneOutbox deletes the delivered and failed rows created before before
// and returns how many it deleted, once that is durable. Pending rows are
// kept whatever their age (the sender gives them up first).
func (s *Store) PruneOutbox(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE state != ? AND created_at < ?`, OutboxPending, fmtTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune outbox: %w", err)
	}
	return n, nil
}
