package api

import (
	"net/http"
	"time"
)

// Role is what a token may do. Viewers read; users also submit and act on
// their own jobs and holds (and on every job of a project they administer);
// admins do everything.
type Role string

// The roles, from least to most allowed.
const (
	RoleViewer Role = "viewer"
	RoleUser   Role = "user"
	RoleAdmin  Role = "admin"
)

// Roles lists the roles from least to most allowed.
var Roles = []Role{RoleViewer, RoleUser, RoleAdmin}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleViewer || r == RoleUser || r == RoleAdmin }

// AtLeast reports whether r allows everything min allows.
func (r Role) AtLeast(min Role) bool { return r.rank() >= min.rank() }

func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleUser:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// TokenRequest is POST /auth/tokens.
type TokenRequest struct {
	User string `json:"user"`
	Role Role   `json:"role,omitempty"` // default user
	// Projects the token may submit to; empty: any project. The first is
	// the default project of its submissions.
	Projects []string `json:"projects,omitempty"`
	// ProjectAdmin lists projects whose every job the token may cancel and
	// re-prioritise (a user token only; admins may anyway).
	ProjectAdmin []string `json:"project_admin,omitempty"`
	Description  string   `json:"description,omitempty"`
	// ExpiresIn, when set, ends the token's validity this long after its
	// creation ("30d" is not a duration: use "720h").
	ExpiresIn RawValue `json:"expires_in,omitempty"`
}

// Token is a token as GET /auth/tokens lists it: never the secret itself.
type Token struct {
	ID           string     `json:"id"`
	User         string     `json:"user"`
	Role         Role       `json:"role"`
	Projects     []string   `json:"projects,omitempty"`
	ProjectAdmin []string   `json:"project_admin,omitempty"`
	Description  string     `json:"description,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	CreatedBy    string     `json:"created_by,omitempty"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
	// Login is how `corral login` made the token (socket:HOST,
	// device:CLIENT, invite:CLIENT, node:NODE); "" for tokens made with
	// corral token create. Signing in the same way again revokes it.
	Login string `json:"login,omitempty"`
}

// NewToken is POST /auth/tokens' answer: the token's record and, this once,
// the secret.
type NewToken struct {
	Token
	Secret string `json:"token"`
}

// TokenList is GET /auth/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// Whoami is GET /auth/whoami (and POST /auth/session's answer): who the
// caller is and what its role allows.
type Whoami struct {
	User         string   `json:"user"`
	Role         Role     `json:"role"`
	TokenID      string   `json:"token_id"`
	Projects     []string `json:"projects,omitempty"`
	ProjectAdmin []string `json:"project_admin,omitempty"`
	Session      bool     `json:"session,omitempty"` // signed in with the dashboard's cookie
}

// SessionRequest is POST /auth/session: sign the dashboard in.
type SessionRequest struct {
	Token string `json:"token"`
}

// AuditEntry is one row of the audit trail: a call that changes (or tried
// to change) something.
type AuditEntry struct {
	Seq       int64     `json:"seq"`
	At        time.Time `json:"at"`
	User      string    `json:"user"` // "" when the caller was not authenticated
	Role      Role      `json:"role,omitempty"`
	TokenID   string    `json:"token_id,omitempty"`
	Action    string    `json:"action"` // e.g. job.submit, token.revoke
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Target    string    `json:"target,omitempty"` // the job, hold, node or token acted on
	Remote    string    `json:"remote"`           // the caller's address
	Status    int       `json:"status"`
	Error     string    `json:"error,omitempty"` // the error code when Status >= 400
	RequestID string    `json:"request_id,omitempty"`
}

// AuditList is GET /audit.
type AuditList struct {
	Entries []AuditEntry `json:"entries"`
}

// Unauthorized returns a 401.
func Unauthorized(code, msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: code, Message: msg}
}

// Forbidden returns a 403.
func Forbidden(code, msg string) *Error {
	return &Error{Status: http.StatusForbidden, Code: code, Message: msg}
}
