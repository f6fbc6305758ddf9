package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// authSchema holds API tokens (only their hashes) and the audit trail.
// Unlike jobs, these are written directly (not through the orchestrator's
// batches): they are not live scheduling state, and each write is
// durable before the call that made it is answered.
const authSchema = `
CREATE TABLE IF NOT EXISTS tokens (
	id TEXT PRIMARY KEY,
	hash TEXT NOT NULL UNIQUE,
	data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	at TEXT NOT NULL,
	user TEXT NOT NULL,
	action TEXT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_user ON audit(user, seq);
CREATE INDEX IF NOT EXISTS audit_action ON audit(action, seq);
` + inviteSchema // invites.go

// TokenRecord is a stored token: its public record and the hash of its
// secret (hex SHA-256; the secret itself is never stored).
type TokenRecord struct {
	api.Token
	Hash string `json:"hash"`
}

// PutToken inserts or replaces a token.
func (s *Store) PutToken(ctx context.Context, t TokenRecord) error {
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("put token: %w", err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO tokens(id, hash, data) VALUES(?,?,?)
		ON CONFLICT(id) DO UPDATE SET hash=excluded.hash, data=excluded.data`, t.ID, t.Hash, string(data))
	if err != nil {
		return fmt.Errorf("put token: %w", err)
	}
	return nil
}

// Tokens reads every token, revoked ones included, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]TokenRecord, error) {
	var out []TokenRecord
	err := s.each(ctx, `SELECT data FROM tokens ORDER BY rowid`, func(r *sql.Rows) error {
		var data string
		if err := r.Scan(&data); err != nil {
			return err
		}
		var t TokenRecord
		if err := json.Unmarshal([]byte(data), &t); err != nil {
			return fmt.Errorf("token row: %w", err)
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// AppendAudit adds entries to the audit trail, all or nothing, and
// returns once they are durable. Concurrent calls share one transaction
// and one fsync (group.go).
func (s *Store) AppendAudit(ctx context.Context, entries ...api.AuditEntry) error {
	if err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return appendAudit(ctx, tx, s.inserts, entries) }); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

func appendAudit(ctx context.Context, tx *sql.Tx, ins inserts, entries []api.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	// One statement for many entries (rows.go).
	args := make([]any, 0, 4*len(entries))
	for _, e := range entries {
		e.Seq = 0
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		args = append(args, e.At.UTC().Format(auditTime), e.User, e.Action, string(data))
	}
	return ins.insert(ctx, tx, insertAudit, args)
}

// auditTime is the audit table's time column: fixed width, so that it
// sorts as text.
const auditTime = "2006-01-02T15:04:05.000000000Z"

// AuditFilter selects audit entries; zero fields match everything.
type AuditFilter struct {
	User   string
	Action string // exact, or a prefix ending in "." (job. matches job.submit)
	Since  time.Time
	Before int64 // only entries with a smaller seq (paging)
	Limit  int   // default 1000
}

// Audit reads audit entries, newest first.
func (s *Store) Audit(ctx context.Context, f AuditFilter) ([]api.AuditEntry, error) {
	var where []string
	var args []any
	if f.User != "" {
		where, args = append(where, "user = ?"), append(args, f.User)
	}
	if f.Action != "" {
		if strings.HasSuffix(f.Action, ".") {
			where, args = append(where, "substr(action, 1, ?) = ?"), append(args, len(f.Action), f.Action)
		} else {
			where, args = append(where, "action = ?"), append(args, f.Action)
		}
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, f.Since.UTC().Format(auditTime))
	}
	if f.Before > 0 {
		where, args = append(where, "seq < ?"), append(args, f.Before)
	}
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	q := `SELECT seq, data FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC"
	q += " LIMIT ?"
	args = append(args, f.Limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer rows.Close()
	out := []api.AuditEntry{}
	for rows.Next() {
		var seq int64
		var data string
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		var e api.AuditEntry
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return nil, fmt.Errorf("audit row: %w", err)
		}
		e.Seq = seq
		out = append(out, e)
	}
	return out, rows.Err()
}

// PruneAudit deletes the audit entries recorded before before and returns
// how many it deleted, once that is durable.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM audit WHERE at < ?`, before.UTC().Format(auditTime))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune audit: %w", err)
	}
	return n, nil
}
