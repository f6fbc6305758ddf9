package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/corral-sched/corral/internal/api"
)

// bookingSchema holds bookings (docs/bookings.md) in the table
// reservations (the API's word; the name stays with the data), one row
// per booking, keyed by its name.
const bookingSchema = `
CREATE TABLE IF NOT EXISTS reservations (
	name TEXT PRIMARY KEY,
	data TEXT NOT NULL
);
`

// writeBookings upserts the batch's bookings and deletes the named
// ones, in tx.
func writeBookings(ctx context.Context, tx *sql.Tx, upserts []api.Reservation, deletes []string) error {
	for _, r := range upserts {
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO reservations(name, data) VALUES(?,?)
			ON CONFLICT(name) DO UPDATE SET data=excluded.data`, r.Name, string(data)); err != nil {
			return fmt.Errorf("booking %s: %w", r.Name, err)
		}
	}
	for _, name := range deletes {
		if _, err := tx.ExecContext(ctx, `DELETE FROM reservations WHERE name = ?`, name); err != nil {
			return fmt.Errorf("booking %s: %w", name, err)
		}
	}
	return nil
}

// loadBookings reads every booking, in name order.
func (s *Store) loadBookings(ctx context.Context, st *State) error {
	return s.each(ctx, `SELECT data FROM reservations ORDER BY name`, func(r *sql.Rows) error {
		var data string
		var v api.Reservation
		if err := r.Scan(&data); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			return fmt.Errorf("booking row: %w", err)
		}
		st.Bookings = append(st.Bookings, v)
		return nil
	})
}
