package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Short numbers. Each job and each job array gets a number,
// unique in the cluster and increasing, that people type instead of its
// id ("1234"; a task of array 1234 is "1234_7"). The orchestrator's loop,
// the store's one writer, takes the next number as it submits and adds
// the pair to the batch (Batch.Numbers), so the number is durable exactly
// when the job is: the row commits in the job's own transaction. The
// primary key makes a number given twice impossible: a batch that tried
// would fail whole (a leader that lost its lease is fenced before that).
// The id is unique too, and indexed: a job or array has one number.
//
// Pruning finished jobs deletes their numbers, but for the largest one
// (pruneNumbers): start-up takes the next number after the largest in
// the table (State.MaxNumber), so numbers keep growing after every job
// before was pruned.
const numberSchema = `
CREATE TABLE IF NOT EXISTS job_numbers (
	number INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE
);
`

// NumberRow gives number Number to the job or array ID.
type NumberRow struct {
	Number int64
	ID     string
}

// writeNumbers inserts the batch's numbers in tx; a number or an id given
// before fails the batch (a constraint: Permanent).
func writeNumbers(ctx context.Context, tx *sql.Tx, rows []NumberRow) error {
	for _, r := range rows {
		if r.Number <= 0 {
			return fmt.Errorf("%w: number %d of %s: numbers start at 1", ErrUnstorable, r.Number, r.ID)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_numbers(number, id) VALUES(?,?)`, r.Number, r.ID); err != nil {
			return fmt.Errorf("number %d of %s: %w", r.Number, r.ID, err)
		}
	}
	return nil
}

// maxNumber is the largest number given so far (0: none).
func (s *Store) maxNumber(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(number) FROM job_numbers`).Scan(&n); err != nil {
		return 0, fmt.Errorf("load: the largest job number: %w", err)
	}
	return n.Int64, nil
}

// NumberID returns the id of the job or array that has number n, and
// whether there is one. It reads the last commit (without waiting for
// the writer on SQLite).
func (s *Store) NumberID(ctx context.Context, n int64) (string, bool, error) {
	var id string
	found := false
	err := s.read(ctx, `SELECT id FROM job_numbers WHERE number = ?`, []any{n}, func(r *sql.Rows) error {
		found = true
		return r.Scan(&id)
	})
	if err != nil {
		return "", false, fmt.Errorf("job number %d: %w", n, err)
	}
	return id, found, nil
}

// Named is a job or job array that a name names: the array's id for its
// tasks.
type Named struct {
	ID     string
	Number int64
	Array  bool
}

// NamedJobs returns up to limit of user's jobs and arrays in the store
// whose name is name (an array once, however many of its tasks have
// rows), newest first, with their numbers (0: none). Live arrays whose
// tasks have not changed have no rows here: the orchestrator adds those
// from memory.
func (s *Store) NamedJobs(ctx context.Context, user, name string, limit int) ([]Named, error) {
	var out []Named
	seen := map[string]bool{}
	// Rows by jobs_by_name (name, id); a big array's tasks are many rows
	// of one key, so the keys are made distinct in SQL.
	q := `SELECT k, MAX(a), COALESCE(MAX(n.number), 0) FROM (
			SELECT CASE WHEN array_id = '' THEN id ELSE array_id END AS k,
				CASE WHEN array_id = '' THEN 0 ELSE 1 END AS a
			FROM jobs WHERE name = ? AND user = ?) t
		LEFT JOIN job_numbers n ON n.id = t.k
		GROUP BY k ORDER BY k DESC LIMIT ?`
	err := s.read(ctx, q, []any{name, user, limit}, func(r *sql.Rows) error {
		var x Named
		var arr int
		if err := r.Scan(&x.ID, &arr, &x.Number); err != nil {
			return err
		}
		x.Array = arr == 1
		if !seen[x.ID] {
			seen[x.ID] = true
			out = append(out, x)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("jobs named %q: %w", name, err)
	}
	return out, nil
}

// pruneNumbers deletes in tx the numbers of the jobs or arrays ids
// (placeholders ph, values args), but for the largest number there is:
// start-up reads it to go on from there.
func pruneNumbers(ctx context.Context, tx *sql.Tx, ph string, args []any) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM job_numbers WHERE id IN (`+ph+`)
		AND number < (SELECT MAX(number) FROM job_numbers)`, args...)
	if err != nil {
		return fmt.Errorf("prune job numbers: %w", err)
	}
	return nil
}
