package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// arraySchema holds job arrays' records. A task's row is written to jobs
// only once the task changes after its submission: until then the task
// is its array's template, queued, with its array's submission event
// (the orchestrator makes it from the record at start-up). So an array of
// 10,000 tasks is one row, not 20,000, when it is submitted.
//
// finished is when the array's last task ended (nanoseconds since the
// epoch), written with the batch that ends it; 0 while some task has not
// ended. Start-up reads only the arrays with 0 (arrays_done.go).
const arraySchema = `
CREATE TABLE IF NOT EXISTS arrays (
	id TEXT PRIMARY KEY,
	data TEXT NOT NULL,
	finished BIGINT NOT NULL DEFAULT 0
);
`

// ArrayRecord is a job array as stored: its spec (Array.Tasks holds every
// task index) and the job each task is made from (ID, state and events
// not set).
type ArrayRecord struct {
	Array    api.Array `json:"array"`
	Template api.Job   `json:"template"`
	// Finished is when the array's last task ended: the array is done,
	// and leaves the orchestrator's memory (zero: it is not). Stored in
	// the column finished, not in the record's JSON.
	Finished time.Time `json:"-"`
}

// writeArrays upserts the batch's array records in tx.
func writeArrays(ctx context.Context, tx *sql.Tx, arrays []ArrayRecord) error {
	for _, r := range arrays {
		r.Array.Counts, r.Array.State = api.ArrayCounts{}, ""
		r.Template.Events = nil
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO arrays(id, data, finished) VALUES(?,?,?)
			ON CONFLICT(id) DO UPDATE SET data=excluded.data, finished=excluded.finished`, r.Array.ID, string(data), nanos(&r.Finished)); err != nil {
			return fmt.Errorf("array %s: %w", r.Array.ID, err)
		}
	}
	return nil
}

// loadArrays reads the records of the arrays that are not done, in id
// order (index arrays_by_finished).
func (s *Store) loadArrays(ctx context.Context, st *State) error {
	return s.each(ctx, `SELECT data FROM arrays WHERE finished = 0 ORDER BY id`, func(r *sql.Rows) error {
		var data string
		var a ArrayRecord
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
