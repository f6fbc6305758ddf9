package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// historySchema keeps the cluster's history for the dashboard's graphs: one
// opaque sample (JSON) per time, in nanoseconds since the epoch.
const historySchema = `
CREATE TABLE IF NOT EXISTS history (
	at INTEGER PRIMARY KEY,
	data TEXT NOT NULL
);
`

// HistoryRow is one stored sample.
type HistoryRow struct {
	At   time.Time
	Data []byte
}

// PutHistory stores a sample taken at at and drops those taken before
// dropBefore, and returns once that is durable. A sample at an existing
// time replaces it.
func (s *Store) PutHistory(ctx context.Context, at time.Time, data []byte, dropBefore time.Time) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO history(at, data) VALUES(?,?)
			ON CONFLICT(at) DO UPDATE SET data=excluded.data`, at.UnixNano(), string(data)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM history WHERE at < ?`, dropBefore.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("put history: %w", err)
	}
	return nil
}

// History reads the samples taken at or after since, oldest first.
func (s *Store) History(ctx context.Context, since time.Time) ([]HistoryRow, error) {
	var out []HistoryRow
	err := s.each(ctx, fmt.Sprintf(`SELECT at, data FROM history WHERE at >= %d ORDER BY at`, since.UnixNano()), func(r *sql.Rows) error {
		var at int64
		var data string
		if err := r.Scan(&at, &data); err != nil {
			return err
		}
		out = append(out, HistoryRow{At: time.Unix(0, at).UTC(), Data: []byte(data)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return out, nil
}
