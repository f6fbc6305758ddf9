package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// inviteSchema holds sign-in invites (corral user add): only the hash of
// each code, its record, and when it was used. used is written by the
// one UPDATE that redeems it, so a code is redeemed once even by servers
// sharing a database.
const inviteSchema = `
CREATE TABLE IF NOT EXISTS invites (
	hash TEXT PRIMARY KEY,
	data TEXT NOT NULL,
	used TEXT NOT NULL DEFAULT ''
);
`

// InviteRecord is a stored invite: its record (without the code) and the
// hash of its code.
type InviteRecord struct {
	api.Invite
	Hash string `json:"hash"`
}

// ErrInviteUsed is returned by TakeInvite for a code that is unknown or
// was redeemed already.
var ErrInviteUsed = errors.New("the invite is unknown or was used")

// PutInvite stores a new invite.
func (s *Store) PutInvite(ctx context.Context, inv InviteRecord) error {
	inv.Code = ""
	data, err := json.Marshal(inv)
	if err != nil {
		return fmt.Errorf("put invite: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO invites(hash, data) VALUES(?,?)`, inv.Hash, string(data)); err != nil {
		return fmt.Errorf("put invite: %w", err)
	}
	return nil
}

// TakeInvite marks the invite whose code hashes to hash used at now and
// returns it; ErrInviteUsed when there is none, or it was used already.
// Expiry is the caller's to check (an expired invite is used up too).
func (s *Store) TakeInvite(ctx context.Context, hash string, now time.Time) (InviteRecord, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE invites SET used = ? WHERE hash = ? AND used = ''`, now.UTC().Format(time.RFC3339Nano), hash)
	if err != nil {
		return InviteRecord{}, fmt.Errorf("take invite: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return InviteRecord{}, fmt.Errorf("take invite: %w", err)
	} else if n != 1 {
		return InviteRecord{}, ErrInviteUsed
	}
	var data string
	if err := s.db.QueryRowContext(ctx, `SELECT data FROM invites WHERE hash = ?`, hash).Scan(&data); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return InviteRecord{}, ErrInviteUsed
		}
		return InviteRecord{}, fmt.Errorf("take invite: %w", err)
	}
	var inv InviteRecord
	if err := json.Unmarshal([]byte(data), &inv); err != nil {
		return InviteRecord{}, fmt.Errorf("invite row: %w", err)
	}
	t := now.UTC()
	inv.UsedAt = &t
	return inv, nil
}
