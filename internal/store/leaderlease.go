package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// leaseSchema is the leadership lease of servers sharing one database
// (fail-over; internal/store/lease runs the election). One row, id 1: who
// holds it, its epoch (only ever grows: each new holder gets the next
// one) and when it expires (nanoseconds since the epoch, by the holders'
// clocks, which are assumed to agree within a small part of the TTL).
const leaseSchema = `
CREATE TABLE IF NOT EXISTS leader_lease (
	id INTEGER PRIMARY KEY,
	holder TEXT NOT NULL,
	epoch BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS server_addresses (
	holder TEXT PRIMARY KEY,
	address TEXT NOT NULL
);
`

// ErrDeposed is returned by every write of a store fenced with an epoch
// (Fence) once another holder has taken the lease: nothing of the write
// was committed.
var ErrDeposed = errors.New("this server no longer holds the leader lease (deposed)")

// AcquireLease takes the lease for holder, until now+ttl, when it is free,
// expired or already holder's (a restarted holder; the epoch grows by one), or renews it when holder already
// holds it at epoch and it has not expired (the epoch stays). It reports
// the epoch held and whether holder holds the lease now. Each attempt is
// one UPDATE, atomic on either database.
func (s *Store) AcquireLease(ctx context.Context, holder string, epoch int64, now time.Time, ttl time.Duration) (int64, bool, error) {
	if holder == "" {
		return 0, false, errors.New("lease: empty holder")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("lease: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO leader_lease(id, holder, epoch, expires_at) VALUES(1, '', 0, 0) ON CONFLICT(id) DO NOTHING`); err != nil {
		return 0, false, fmt.Errorf("lease: %w", err)
	}
	exp, n := now.Add(ttl).UnixNano(), now.UnixNano()
	var res sql.Result
	renew := epoch > 0
	if renew {
		res, err = tx.ExecContext(ctx, `UPDATE leader_lease SET expires_at = ? WHERE id = 1 AND holder = ? AND epoch = ? AND expires_at > ?`, exp, holder, epoch, n)
	} else {
		res, err = tx.ExecContext(ctx, `UPDATE leader_lease SET holder = ?, epoch = epoch + 1, expires_at = ? WHERE id = 1 AND (holder = '' OR holder = ? OR expires_at <= ?)`, holder, exp, holder, n)
	}
	if err != nil {
		return 0, false, fmt.Errorf("lease: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != 1 {
		return 0, false, err
	}
	if !renew {
		if err := tx.QueryRowContext(ctx, `SELECT epoch FROM leader_lease WHERE id = 1`).Scan(&epoch); err != nil {
			return 0, false, fmt.Errorf("lease: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("lease: %w", err)
	}
	return epoch, true, nil
}

// ReleaseLease gives the lease up at once (a clean stop), if holder still
// holds it at epoch; the epoch stays, so the next holder's is greater.
func (s *Store) ReleaseLease(ctx context.Context, holder string, epoch int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE leader_lease SET holder = '', expires_at = 0 WHERE id = 1 AND holder = ? AND epoch = ?`, holder, epoch)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	return nil
}

// SetServerAddress records the base URL at which the server named holder
// (its lease holder name) is reached (corral server --advertise), so that
// the others can send clients to it while it leads.
func (s *Store) SetServerAddress(ctx context.Context, holder, address string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO server_addresses(holder, address) VALUES(?, ?)
		ON CONFLICT(holder) DO UPDATE SET address = excluded.address`, holder, address)
	if err != nil {
		return fmt.Errorf("server address: %w", err)
	}
	return nil
}

// LeaderInfo is who holds the leader lease, as the database says.
type LeaderInfo struct {
	Holder  string // "": nobody holds it
	Address string // its SetServerAddress; "" when it recorded none
	Epoch   int64
	Expires time.Time
}

// Leader reads the lease row and the holder's address. A lease that has
// expired by now, or was given up, has no Holder.
func (s *Store) Leader(ctx context.Context, now time.Time) (LeaderInfo, error) {
	var l LeaderInfo
	var exp int64
	err := s.db.QueryRowContext(ctx, `SELECT l.holder, l.epoch, l.expires_at, COALESCE(a.address, '')
		FROM leader_lease l LEFT JOIN server_addresses a ON a.holder = l.holder WHERE l.id = 1`).Scan(&l.Holder, &l.Epoch, &exp, &l.Address)
	if errors.Is(err, sql.ErrNoRows) {
		return LeaderInfo{}, nil
	}
	if err != nil {
		return LeaderInfo{}, fmt.Errorf("leader: %w", err)
	}
	l.Expires = time.Unix(0, exp)
	if l.Holder == "" || !now.Before(l.Expires) {
		return LeaderInfo{Epoch: l.Epoch}, nil
	}
	return l, nil
}

// fence is the epoch every write checks inside its own transaction.
type fence struct {
	mu        sync.Mutex
	epoch     int64 // 0: not fenced (a lone server)
	onDeposed func()
}

// Fence makes every later write of the store (each committer transaction)
// check, inside itself, that the lease is still at epoch: the check is
// an UPDATE of the lease row, so a holder taking the lease concurrently
// either commits first (and this write fails with ErrDeposed, changing
// nothing) or waits for this write's commit. onDeposed is called (once,
// from the committer) when a write finds the lease taken: the server must
// step down at once. Epoch 0 removes the fence.
func (s *Store) Fence(epoch int64, onDeposed func()) {
	s.fence.mu.Lock()
	defer s.fence.mu.Unlock()
	s.fence.epoch, s.fence.onDeposed = epoch, onDeposed
}

// checkFence runs the fence's check in tx; nil when not fenced.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx) error {
	s.fence.mu.Lock()
	epoch, onDeposed := s.fence.epoch, s.fence.onDeposed
	s.fence.mu.Unlock()
	if epoch == 0 {
		return nil
	}
	res, err := tx.ExecContext(ctx, `UPDATE leader_lease SET epoch = epoch WHERE id = 1 AND epoch = ?`, epoch)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		// Every later write fails too (no row has epoch -1), until Fence
		// is called again; onDeposed is called once.
		s.Fence(-1, nil)
		if onDeposed != nil {
			onDeposed()
		}
		return ErrDeposed
	}
	return nil
}
