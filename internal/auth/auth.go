// Package auth is Corral's authentication and its audit trail: API tokens
// (random, shown once, stored as SHA-256 hashes), the roles they carry, and
// the record of every call that changes something.
//
// A Service keeps every live token in memory, indexed by hash, so checking
// a request costs one hash and one map lookup; every change (create,
// revoke) is written to the store first and applied in memory after, so a
// revoked token fails at once and stays revoked across restarts.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/lazyre"
	"github.com/corral-sched/corral/internal/store"
)

// Store is what the service persists to (store.Store).
type Store interface {
	PutToken(ctx context.Context, t store.TokenRecord) error
	Tokens(ctx context.Context) ([]store.TokenRecord, error)
	AppendAudit(ctx context.Context, entries ...api.AuditEntry) error
	Audit(ctx context.Context, f store.AuditFilter) ([]api.AuditEntry, error)
}

// BootstrapID is the id of the bootstrap admin token (CORRAL_ADMIN_TOKEN or
// <data-dir>/admin.token).
const BootstrapID = "bootstrap-admin"

// Limits on what a token may carry.
const (
	MinSecretLen    = 16
	MaxSecretLen    = 256
	maxNameLen      = 128
	maxProjects     = 64
	maxDescription  = 256
	maxLiveTokens   = 10000
	secretPrefix    = "corral_"
	secretRandBytes = 32
)

var name = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_.@-]*$`)

// ValidName reports whether s may be a user or project name (the rule the
// orchestrator applies to jobs).
func ValidName(s string) bool { return len(s) <= maxNameLen && name.MatchString(s) }

// ErrBootstrapRevoked is returned by Bootstrap when the bootstrap secret
// was revoked through the API: it stays revoked.
var ErrBootstrapRevoked = errors.New("the bootstrap admin token was revoked; it stays revoked (remove admin.token, or set another CORRAL_ADMIN_TOKEN, and restart to make a new one)")

// Principal is the caller of a request: who, with what role.
type Principal struct {
	TokenID      string
	User         string
	Role         api.Role
	Projects     []string // may submit to these only; empty: any
	ProjectAdmin []string // may act on every job of these
	Session      bool     // authenticated by the dashboard's cookie
	// ExpiresAt is when the token stops working; nil: never. A stream
	// ends then (see Service.Ended for revocation).
	ExpiresAt *time.Time
}

// IsAdmin reports whether p has the admin role.
func (p Principal) IsAdmin() bool { return p.Role == api.RoleAdmin }

// CanActOn reports whether p may change a job or hold of user in project:
// admins always, users their own and those of projects they administer,
// viewers never.
func (p Principal) CanActOn(user, project string) bool {
	switch p.Role {
	case api.RoleAdmin:
		return true
	case api.RoleUser:
		return user == p.User || (project != "" && slices.Contains(p.ProjectAdmin, project))
	}
	return false
}

// MaySubmitTo reports whether p may submit to project.
func (p Principal) MaySubmitTo(project string) bool {
	return p.IsAdmin() || len(p.Projects) == 0 || slices.Contains(p.Projects, project)
}

// DefaultProject is the project of p's submissions that name none: its
// first project, else "" (the server's default).
func (p Principal) DefaultProject() string {
	if len(p.Projects) > 0 && !p.IsAdmin() {
		return p.Projects[0]
	}
	return ""
}

// Whoami is p as GET /auth/whoami shows it.
func (p Principal) Whoami() api.Whoami {
	return api.Whoami{User: p.User, Role: p.Role, TokenID: p.TokenID, Projects: p.Projects, ProjectAdmin: p.ProjectAdmin, Session: p.Session}
}

// Service checks tokens and keeps the audit trail. Create it with New; its
// methods are safe for concurrent use.
type Service struct {
	st  Store
	now func() time.Time

	mu     sync.RWMutex // guards the maps; writers hold it across the store write
	byHash map[string]*store.TokenRecord
	byID   map[string]*store.TokenRecord
	// ended holds, for each live token that a stream watches, the
	// channel Ended returns: closed when the token is revoked or
	// replaced.
	ended map[string]chan struct{}
}

// New loads the tokens from st. now is the clock (nil: time.Now).
func New(ctx context.Context, st Store, now func() time.Time) (*Service, error) {
	if now == nil {
		now = time.Now
	}
	ts, err := st.Tokens(ctx)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	s := &Service{st: st, now: now, byHash: map[string]*store.TokenRecord{}, byID: map[string]*store.TokenRecord{}, ended: map[string]chan struct{}{}}
	for i := range ts {
		s.index(&ts[i])
	}
	return s, nil
}

// Reload reads the tokens from the store again, for a server that does
// not write them itself (a follower, while another server leads): tokens
// made since are added, revoked ones stop working.
func (s *Service) Reload(ctx context.Context) error {
	ts, err := s.st.Tokens(ctx)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ts {
		s.index(&ts[i])
	}
	return nil
}

// index puts t in the maps, in place of the record of its id; when that
// ends a live secret (revoked, or replaced by another), the streams that
// watch it are told (Ended). Write lock held.
func (s *Service) index(t *store.TokenRecord) {
	if old, ok := s.byID[t.ID]; ok {
		delete(s.byHash, old.Hash)
		if ch, ok := s.ended[t.ID]; ok && (t.RevokedAt != nil || t.Hash != old.Hash) {
			close(ch)
			delete(s.ended, t.ID)
		}
	}
	s.byID[t.ID] = t
	if t.RevokedAt == nil {
		s.byHash[t.Hash] = t
	}
}

// Ended returns a channel that is closed when token id stops working
// through revocation (or the bootstrap secret being replaced): at once
// when it is unknown or revoked already. Streams (GET /events, a followed
// log) watch it to end when their credential does; expiry is a time
// known in advance (Principal.ExpiresAt), so it is not signalled here.
func (s *Service) Ended(id string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.byID[id]; !ok || t.RevokedAt != nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	ch, ok := s.ended[id]
	if !ok {
		ch = make(chan struct{})
		s.ended[id] = ch
	}
	return ch
}

// Hash is the stored form of a secret: hex SHA-256. Secrets are random
// and long, so a plain hash is enough (no password stretching).
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewSecret returns a new random secret: "corral_" and 43 base64url
// characters (256 bits).
func NewSecret() (string, error) {
	var b [secretRandBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func newID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return "tok-" + hex.EncodeToString(b[:]), nil
}

// Authenticate returns the principal of a secret, or a 401 saying why not.
func (s *Service) Authenticate(secret string) (Principal, error) {
	if secret == "" {
		return Principal{}, api.Unauthorized("unauthenticated", "this server needs a token: send Authorization: Bearer TOKEN (the CLI reads CORRAL_TOKEN or --token)")
	}
	if len(secret) > MaxSecretLen {
		return Principal{}, api.Unauthorized("bad_token", "the token is not valid")
	}
	h := Hash(secret)
	s.mu.RLock()
	t, ok := s.byHash[h]
	var p Principal
	if ok {
		p = Principal{TokenID: t.ID, User: t.User, Role: t.Role, Projects: t.Projects, ProjectAdmin: t.ProjectAdmin, ExpiresAt: t.ExpiresAt}
	}
	expired := ok && t.ExpiresAt != nil && !s.now().Before(*t.ExpiresAt)
	s.mu.RUnlock()
	switch {
	case !ok:
		return Principal{}, api.Unauthorized("bad_token", "the token is not valid (unknown or revoked)")
	case expired:
		return Principal{}, api.Unauthorized("token_expired", "the token has expired")
	}
	return p, nil
}

// Bootstrap makes secret the bootstrap admin token of user. A different
// secret than last time replaces the old one (which stops working); the
// same secret after it was revoked stays revoked (ErrBootstrapRevoked).
func (s *Service) Bootstrap(ctx context.Context, secret, user string) error {
	if len(secret) < MinSecretLen || len(secret) > MaxSecretLen {
		return fmt.Errorf("the admin token must be %d to %d characters long", MinSecretLen, MaxSecretLen)
	}
	if !ValidName(user) {
		user = "admin"
	}
	h := Hash(secret)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byID[BootstrapID]; ok && old.Hash == h {
		if old.RevokedAt != nil {
			return ErrBootstrapRevoked
		}
		return nil
	}
	if other, ok := s.byHash[h]; ok {
		return fmt.Errorf("the admin token is already token %s of %s; use another secret", other.ID, other.User)
	}
	t := &store.TokenRecord{Hash: h, Token: api.Token{ID: BootstrapID, User: user, Role: api.RoleAdmin,
		Description: "bootstrap admin", CreatedAt: s.now().UTC(), CreatedBy: "corral"}}
	if err := s.st.PutToken(ctx, *t); err != nil {
		return err
	}
	s.index(t)
	return nil
}

// Create makes a token; the answer holds its secret, which is never
// shown again. by is the admin creating it.
func (s *Service) Create(ctx context.Context, req api.TokenRequest, by Principal) (api.NewToken, error) {
	if err := checkRequest(&req); err != nil {
		return api.NewToken{}, err
	}
	if err := api.CheckText("description", req.Description, maxDescription); err != nil {
		return api.NewToken{}, err
	}
	now := s.now().UTC()
	var expires *time.Time
	if !api.IsNull(req.ExpiresIn) {
		d, err := api.ParseSecondsJSON(req.ExpiresIn)
		if err != nil || d.Duration() <= 0 {
			return api.NewToken{}, api.Invalid("expires_in", "must be a positive duration such as 720h")
		}
		t := now.Add(d.Duration())
		expires = &t
	}
	secret, err := NewSecret()
	if err != nil {
		return api.NewToken{}, err
	}
	id, err := newID()
	if err != nil {
		return api.NewToken{}, err
	}
	t := &store.TokenRecord{Hash: Hash(secret), Token: api.Token{ID: id, User: req.User, Role: req.Role,
		Projects: dedupe(req.Projects), ProjectAdmin: dedupe(req.ProjectAdmin), Description: req.Description,
		CreatedAt: now, CreatedBy: by.User, ExpiresAt: expires}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byHash) >= maxLiveTokens {
		return api.NewToken{}, api.Conflict("too_many_tokens", "there are %d live tokens already; revoke some first", len(s.byHash))
	}
	if err := s.st.PutToken(ctx, *t); err != nil {
		return api.NewToken{}, err
	}
	s.index(t)
	return api.NewToken{Token: t.Token, Secret: secret}, nil
}

// checkRequest checks a token request's user, role and projects (the
// rules of tokens and invites alike), trimming the user and defaulting
// the role to user.
func checkRequest(req *api.TokenRequest) error {
	req.User = strings.TrimSpace(req.User)
	switch {
	case req.User == "":
		return api.Invalid("user", "is required")
	case !ValidName(req.User):
		return api.Invalid("user", "%q is not a valid user name (letters, digits, '_', '.', '@', '-'; at most %d)", clip(req.User), maxNameLen)
	}
	if req.Role == "" {
		req.Role = api.RoleUser
	}
	if !req.Role.Valid() {
		return api.Invalid("role", "%q is not a role; use admin, user or viewer", clip(string(req.Role)))
	}
	for field, list := range map[string][]string{"projects": req.Projects, "project_admin": req.ProjectAdmin} {
		if len(list) > maxProjects {
			return api.Invalid(field, "has %d projects; at most %d are allowed", len(list), maxProjects)
		}
		for _, p := range list {
			if !ValidName(p) {
				return api.Invalid(field, "%q is not a valid project name", clip(p))
			}
		}
	}
	if len(req.ProjectAdmin) > 0 && req.Role != api.RoleUser {
		return api.Invalid("project_admin", "is for user tokens (admins act on every project, viewers on none)")
	}
	return nil
}

// List returns every token, revoked ones included, oldest first.
func (s *Service) List() []api.Token {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]api.Token, 0, len(s.byID))
	for _, t := range s.byID {
		out = append(out, t.Token)
	}
	slices.SortFunc(out, func(a, b api.Token) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Get returns one token.
func (s *Service) Get(id string) (api.Token, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byID[id]
	if !ok {
		return api.Token{}, false
	}
	return t.Token, true
}

// Revoke ends a token at once. Revoking a revoked token is a no-op that
// answers its record.
func (s *Service) Revoke(ctx context.Context, id string) (api.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byID[id]
	if !ok {
		return api.Token{}, api.NotFound("no token %q", clip(id))
	}
	if t.RevokedAt != nil {
		return t.Token, nil
	}
	c := *t
	now := s.now().UTC()
	c.RevokedAt = &now
	if err := s.st.PutToken(ctx, c); err != nil {
		return api.Token{}, err
	}
	s.index(&c)
	return c.Token, nil
}

// Record appends entries to the audit trail, in one write; it returns
// once they are durable.
func (s *Service) Record(ctx context.Context, e ...api.AuditEntry) error {
	return s.st.AppendAudit(ctx, e...)
}

// Audit reads the audit trail, newest first.
func (s *Service) Audit(ctx context.Context, f store.AuditFilter) ([]api.AuditEntry, error) {
	return s.st.Audit(ctx, f)
}

func dedupe(list []string) []string {
	var out []string
	for _, v := range list {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
