package store

import (
	"context"
	"database/sql"
	"fmt"
)

// NotifyDefaultRecord is one user's own notification defaults: the user
// and their JSON (package notify's). Like endpoints, they are written
// directly: they are not live scheduling state.
type NotifyDefaultRecord struct {
	User string
	Data string
}

// PutNotifyDefault inserts or replaces a user's defaults and returns once
// that is durable.
func (s *Store) PutNotifyDefault(ctx context.Context, d NotifyDefaultRecord) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO notify_defaults(user, data) VALUES(?,?)
			ON CONFLICT(user) DO UPDATE SET data=excluded.data`, d.User, d.Data)
		return err
	})
	if err != nil {
		return fmt.Errorf("put notify defaults: %w", err)
	}
	return nil
}

// DeleteNotifyDefault removes a user's defaults (they go back to the
// built-in ones); removing none is no error.
func (s *Store) DeleteNotifyDefault(ctx context.Context, user string) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM notify_defaults WHERE user = ?`, user)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete notify defaults: %w", err)
	}
	return nil
}

// NotifyDefaults reads every user's defaults.
func (s *Store) NotifyDefaults(ctx context.Context) ([]NotifyDefaultRecord, error) {
	var out []NotifyDefaultRecord
	err := s.each(ctx, `SELECT user, data FROM notify_defaults ORDER BY user`, func(r *sql.Rows) error {
		var d NotifyDefaultRecord
		if err := r.Scan(&d.User, &d.Data); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("notify defaults: %w", err)
	}
	return out, nil
}
