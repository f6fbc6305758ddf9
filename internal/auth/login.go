package auth

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// DefaultLoginTTL is how long a token made by `corral login` works unless
// the server says otherwise (--login-token-ttl).
const DefaultLoginTTL = 30 * 24 * time.Hour

// maxLoginKey bounds a login key (how a token was made, e.g. device:HOST).
const maxLoginKey = 160

// Grant is a token to issue by a sign-in (login socket, device flow,
// invite): whose, with what role, and how it was made.
type Grant struct {
	User         string
	Role         api.Role // "": user
	Projects     []string
	ProjectAdmin []string
	// Login is how the token is made (socket:HOST, device:CLIENT, ...):
	// the user's previous live token of the same key is revoked.
	Login string
	// TTL is how long the token works; 0: DefaultLoginTTL.
	TTL time.Duration
	// NotAfter, when set, caps the token's expiry (a device sign-in
	// never outlives the credential that approved it).
	NotAfter *time.Time
	// By is who made it (the approving user, "login-socket", ...).
	By string
}

// Login issues the token of g and revokes the user's previous live token
// of the same login key, in one step under the service's lock: signing in
// again replaces the token rather than adding one. It returns the new
// token with its secret (shown once) and the id of the token it replaced
// ("" when none).
func (s *Service) Login(ctx context.Context, g Grant) (api.NewToken, string, error) {
	if !ValidName(g.User) {
		return api.NewToken{}, "", api.Invalid("user", "%q is not a valid user name", clip(g.User))
	}
	if g.Role == "" {
		g.Role = api.RoleUser
	}
	if !g.Role.Valid() {
		return api.NewToken{}, "", api.Invalid("role", "%q is not a role", clip(string(g.Role)))
	}
	if len(g.Login) > maxLoginKey {
		g.Login = g.Login[:maxLoginKey]
	}
	if g.TTL <= 0 {
		g.TTL = DefaultLoginTTL
	}
	now := s.now().UTC()
	expires := now.Add(g.TTL)
	if g.NotAfter != nil && g.NotAfter.Before(expires) {
		expires = g.NotAfter.UTC()
	}
	if !expires.After(now) {
		return api.NewToken{}, "", api.Unauthorized("token_expired", "the approving token has expired")
	}
	secret, err := NewSecret()
	if err != nil {
		return api.NewToken{}, "", err
	}
	id, err := newID()
	if err != nil {
		return api.NewToken{}, "", err
	}
	t := &store.TokenRecord{Hash: Hash(secret), Token: api.Token{ID: id, User: g.User, Role: g.Role,
		Projects: dedupe(g.Projects), ProjectAdmin: dedupe(g.ProjectAdmin), Description: "corral login (" + g.Login + ")",
		CreatedAt: now, CreatedBy: g.By, ExpiresAt: &expires, Login: g.Login}}
	s.mu.Lock()
	defer s.mu.Unlock()
	var old *store.TokenRecord
	for _, o := range s.byHash {
		if o.User == g.User && o.Login == g.Login && g.Login != "" {
			old = o
			break
		}
	}
	if old == nil && len(s.byHash) >= maxLiveTokens {
		return api.NewToken{}, "", api.Conflict("too_many_tokens", "there are %d live tokens already; revoke some first", len(s.byHash))
	}
	if err := s.st.PutToken(ctx, *t); err != nil {
		return api.NewToken{}, "", err
	}
	s.index(t)
	replaced := ""
	if old != nil {
		c := *old
		c.RevokedAt = &now
		if err := s.st.PutToken(ctx, c); err != nil {
			// The new token works; the old one stays live until revoked
			// by hand. Say so rather than fail the sign-in.
			return api.NewToken{Token: t.Token, Secret: secret}, "", fmt.Errorf("auth: signed in, but the previous token %s was not revoked: %w", old.ID, err)
		}
		s.index(&c)
		replaced = old.ID
	}
	return api.NewToken{Token: t.Token, Secret: secret}, replaced, nil
}

// ErrLoginRefused is wrapped by LocalAccount's refusals: a caller the
// login socket does not sign in.
var ErrLoginRefused = errors.New("login refused")

// LocalPolicy is who a login socket signs in: any local account but
// root, unless AllowRoot; with Group set, only that Unix group's members.
type LocalPolicy struct {
	Group     string
	AllowRoot bool
}

// Account returns the name of the local Unix account uid, or an error
// wrapping ErrLoginRefused that says why it is not signed in.
func (p LocalPolicy) Account(uid uint32) (string, error) {
	if uid == 0 && !p.AllowRoot {
		return "", fmt.Errorf("%w: root is not signed in through the login socket (use the admin token, or start the server with --login-allow-root)", ErrLoginRefused)
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return "", fmt.Errorf("%w: uid %d has no account on this machine: %v", ErrLoginRefused, uid, err)
	}
	if !ValidName(u.Username) {
		return "", fmt.Errorf("%w: the account name of uid %d is not a valid Corral user name", ErrLoginRefused, uid)
	}
	if p.Group == "" {
		return u.Username, nil
	}
	g, err := user.LookupGroup(p.Group)
	if err != nil {
		return "", fmt.Errorf("%w: the login group %q: %v", ErrLoginRefused, p.Group, err)
	}
	gids, err := u.GroupIds()
	if err != nil {
		return "", fmt.Errorf("%w: the groups of %s: %v", ErrLoginRefused, u.Username, err)
	}
	if !slices.Contains(gids, g.Gid) {
		return "", fmt.Errorf("%w: %s is not in the group %s, which this server signs in", ErrLoginRefused, u.Username, p.Group)
	}
	return u.Username, nil
}
