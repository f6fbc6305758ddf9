package auth

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// Invites: an admin makes a single-use, expiring code for a user
// (corral user add ana --project vision); the user redeems it once from
// anywhere (corral login URL --invite CODE) for a token of their own.
// Only the code's hash is stored, in the store, so invites survive a
// restart and a code is redeemed once even by servers sharing a database.

// DefaultInviteTTL is how long an invite may be redeemed unless its
// maker says otherwise.
const DefaultInviteTTL = 7 * 24 * time.Hour

// invitePrefix starts every invite code, so that people (and secret
// scanners) tell it from a token.
const invitePrefix = "corral-invite-"

// InviteStore is what invites need of the store (store.Store); a
// Service over a store without it refuses invites.
type InviteStore interface {
	PutInvite(ctx context.Context, inv store.InviteRecord) error
	TakeInvite(ctx context.Context, hash string, now time.Time) (store.InviteRecord, error)
}

func (s *Service) invites() (InviteStore, error) {
	is, ok := s.st.(InviteStore)
	if !ok {
		return nil, &api.Error{Status: 501, Code: "not_supported", Message: "this server's store keeps no invites"}
	}
	return is, nil
}

// CreateInvite makes an invite; the answer holds its code, which is never
// shown again. by is the admin making it.
func (s *Service) CreateInvite(ctx context.Context, req api.InviteRequest, by Principal) (api.Invite, error) {
	is, err := s.invites()
	if err != nil {
		return api.Invite{}, err
	}
	// The same checks as a token's.
	if err := checkRequest(&api.TokenRequest{User: req.User, Role: req.Role, Projects: req.Projects, ProjectAdmin: req.ProjectAdmin}); err != nil {
		return api.Invite{}, err
	}
	req.User = strings.TrimSpace(req.User)
	if req.Role == "" {
		req.Role = api.RoleUser
	}
	ttl := DefaultInviteTTL
	if !api.IsNull(req.ExpiresIn) {
		d, err := api.ParseSecondsJSON(req.ExpiresIn)
		if err != nil || d.Duration() <= 0 {
			return api.Invite{}, api.Invalid("expires_in", "must be a positive duration such as 168h")
		}
		ttl = d.Duration()
	}
	var raw [20]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return api.Invite{}, fmt.Errorf("new invite: %w", err)
	}
	code := invitePrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:]))
	var idb [6]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return api.Invite{}, fmt.Errorf("new invite: %w", err)
	}
	now := s.now().UTC()
	inv := api.Invite{ID: "inv-" + hex.EncodeToString(idb[:]), User: req.User, Role: req.Role,
		Projects: dedupe(req.Projects), ProjectAdmin: dedupe(req.ProjectAdmin),
		CreatedAt: now, CreatedBy: by.User, ExpiresAt: now.Add(ttl)}
	if err := is.PutInvite(ctx, store.InviteRecord{Invite: inv, Hash: Hash(code)}); err != nil {
		return api.Invite{}, err
	}
	inv.Code = code
	return inv, nil
}

// RedeemInvite uses up the invite of code and issues a token of its user
// (Login, keyed invite:CLIENT); ttl is the token's life (0: DefaultLoginTTL).
// A wrong, used or expired code is a 401 that says which it may be,
// without telling a guesser anything about other codes.
func (s *Service) RedeemInvite(ctx context.Context, code, client string, ttl time.Duration) (api.NewToken, api.Invite, error) {
	is, err := s.invites()
	if err != nil {
		return api.NewToken{}, api.Invite{}, err
	}
	code = strings.TrimSpace(code)
	if code == "" {
		return api.NewToken{}, api.Invite{}, api.Invalid("code", "is required")
	}
	if len(code) > MaxSecretLen {
		return api.NewToken{}, api.Invite{}, api.Unauthorized("bad_invite", "the invite code is not valid")
	}
	now := s.now()
	inv, err := is.TakeInvite(ctx, Hash(code), now)
	switch {
	case errors.Is(err, store.ErrInviteUsed):
		return api.NewToken{}, api.Invite{}, api.Unauthorized("bad_invite", "the invite code is not valid, or was used already (an invite signs in once; ask an admin for another: corral user add)")
	case err != nil:
		return api.NewToken{}, api.Invite{}, err
	case !now.Before(inv.ExpiresAt):
		return api.NewToken{}, api.Invite{}, api.Unauthorized("invite_expired", "the invite expired at "+inv.ExpiresAt.UTC().Format(time.RFC3339)+"; ask an admin for another: corral user add")
	}
	t, _, err := s.Login(ctx, Grant{User: inv.User, Role: inv.Role, Projects: inv.Projects, ProjectAdmin: inv.ProjectAdmin,
		Login: "invite:" + clientKey(client), TTL: ttl, By: inv.CreatedBy})
	return t, inv.Invite, err
}

// clientKey is a client's name as a login key holds it: printable, short.
func clientKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		if r > 0x20 && r < 0x7f {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "unnamed"
	}
	return b.String()
}

// ClientKey is clientKey for the server's handlers.
func ClientKey(s string) string { return clientKey(s) }
