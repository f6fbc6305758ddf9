package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PruneDoneArrays deletes up to limit done job arrays whose last task
// ended before before, other than those keep names (arrays that waiting
// jobs depend on): each array's record and all its tasks, with their
// events and idempotency keys, in one transaction, and takes the tasks
// out of the ended-jobs summary. It returns the tasks and the arrays it
// deleted (none: nothing is left to prune). PruneFinished leaves array
// tasks to it: an array goes whole or not at all.
func (s *Store) PruneDoneArrays(ctx context.Context, before time.Time, limit int, keep []string) ([]PrunedJob, []string, error) {
	query, args := notIn(`SELECT id FROM arrays WHERE finished > 0 AND finished < ?`, []any{before.UnixNano()}, "id", keep)
	arrays, err := s.readIDs(ctx, "prune done arrays", query+` ORDER BY finished, id LIMIT ?`, append(args, limit)...)
	if err != nil || len(arrays) == 0 {
		return nil, nil, err
	}
	in, ids := placeholders(len(arrays)), anys(arrays)
	var tasks []PrunedJob
	var ended []EndedJob
	err = s.read(ctx, `SELECT id, state, user, project, started, finished, gpu_seconds FROM jobs
		WHERE array_id IN (`+in+`) AND array_id > ''`, ids, prunedRow(func(p PrunedJob, e EndedJob) {
		tasks, ended = append(tasks, p), append(ended, e)
	}))
	if err != nil {
		return nil, nil, fmt.Errorf("prune done arrays: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		tasksOf := `(SELECT id FROM jobs WHERE array_id IN (` + in + `) AND array_id > '')`
		for _, q := range []string{
			`DELETE FROM events WHERE job_id IN ` + tasksOf,
			`DELETE FROM idempotency WHERE job_id IN ` + tasksOf,
			`DELETE FROM jobs WHERE array_id IN (` + in + `) AND array_id > ''`,
			`DELETE FROM arrays WHERE id IN (` + in + `)`,
		} {
			if _, err := tx.ExecContext(ctx, q, ids...); err != nil {
				return err
			}
		}
		if err := pruneNumbers(ctx, tx, in, ids); err != nil { // numbers.go
			return err
		}
		return unsummarize(ctx, tx, ended) // job_usage.go
	})
	if err != nil {
		return nil, nil, fmt.Errorf("prune done arrays: %w", err)
	}
	return tasks, arrays, nil
}
