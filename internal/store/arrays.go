package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/corral-sched/corral/internal/api"
)

// arraySchema holds job arrays' records: an array's spec and throttle (its
// tasks are rows of jobs). Its counts are not stored: they are the tasks'.
const arraySchema = `
CREATE TABLE IF NOT EXISTS arrays (
	id TEXT PRIMARY KEY,
	data TEXT NOT NULL
);
`

// writeArrays upserts the batch's array records in tx.
func writeArrays(ctx context.Context, tx *sql.Tx, arrays []api.Array) error {
	for _, a := range arrays {
		a.Counts, a.State = api.ArrayCounts{}, ""
		data, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO arrays(id, data) VALUES(?,?)
			ON CONFLICT(id) DO UPDATE SET data=excluded.data`, a.ID, string(data)); err != nil {
			return fmt.Errorf("array %s: %w", a.ID, err)
		}
	}
	return nil
}

// loadArrays reads every array record, in id order.
func (s *Store) loadArrays(ctx context.Context, st *State) error {
	return s.each(ctx, `SELECT data FROM arrays ORDER BY id`, func(r *sql.Rows) error {
		var data string
		var a api.Array
		if err := r.Scan(&data); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			return fmt.Errorf("array row: %w", err)
		}
		st.Arrays = append(st.Arrays, a)
		return nil
	})
}
