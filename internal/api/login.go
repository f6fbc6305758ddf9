package api

import "time"

// Signing in without handing out secrets (docs/team.md, "Signing in").
// Three ways give a user a token of their own, each answered with
// NewToken (its secret shown once):
//
//   - the login socket: a Unix socket on the server's machine (or an
//     agent's) that knows its caller's uid from the kernel (SO_PEERCRED)
//     and issues a token for that Unix account;
//   - the device flow: the CLI asks for a code (POST /auth/device), its
//     user approves it in the dashboard, where they are signed in
//     (POST /auth/device/approve), and the CLI gets the token
//     (POST /auth/device/token);
//   - an invite an admin made (POST /auth/invites), redeemed once
//     (POST /auth/invites/redeem).
//
// A login token carries the Login key of how it was made (socket:HOST,
// device:CLIENT, invite:CLIENT); signing in again the same way replaces
// (revokes) the user's previous token of that key, so tokens do not pile
// up.

// LoginRequest is what the CLI sends to a login socket (POST /login over
// the Unix socket), and the client part of the other flows' requests.
type LoginRequest struct {
	// Client names the machine or program signing in (e.g. the
	// laptop's host name), so that signing in again from it replaces
	// its previous token; optional.
	Client string `json:"client,omitempty"`
}

// LoginAnswer is a login's answer: the token and, from a login socket,
// the server's address for clients (what `corral login` saves as the
// default server).
type LoginAnswer struct {
	NewToken
	// Server is the base URL of the server the token is for, when the
	// answering side knows it (a login socket).
	Server string `json:"server,omitempty"`
}

// DeviceStart is POST /auth/device's answer: the codes of a device sign-in.
type DeviceStart struct {
	// UserCode is what the user types in the dashboard (ABCD-EFGH).
	UserCode string `json:"user_code"`
	// DeviceCode is the CLI's secret for polling POST /auth/device/token.
	DeviceCode string `json:"device_code"`
	// VerificationURI is the dashboard page where the code is approved.
	VerificationURI string `json:"verification_uri"`
	// Interval is the least number of seconds between polls.
	Interval int `json:"interval"`
	// ExpiresIn is how many seconds the codes stay valid.
	ExpiresIn int `json:"expires_in"`
}

// DeviceTokenRequest is POST /auth/device/token: the CLI polls with its
// device code. The answer is 409 authorization_pending until the code is
// approved, then the token once (LoginAnswer); 410 expired_token after
// the codes expire or once the token was given.
type DeviceTokenRequest struct {
	DeviceCode string `json:"device_code"`
	LoginRequest
}

// DeviceApproveRequest is POST /auth/device/approve: a signed-in user
// (dashboard session or token) approves a user code; the CLI that shows
// it gets a token of that user, with that user's role and projects.
type DeviceApproveRequest struct {
	UserCode string `json:"user_code"`
}

// DeviceApproved is POST /auth/device/approve's answer.
type DeviceApproved struct {
	User string `json:"user"`
	Role Role   `json:"role"`
}

// InviteRequest is POST /auth/invites (admin): a single-use, expiring
// code that signs user in (corral user add).
type InviteRequest struct {
	User         string   `json:"user"`
	Role         Role     `json:"role,omitempty"` // default user
	Projects     []string `json:"projects,omitempty"`
	ProjectAdmin []string `json:"project_admin,omitempty"`
	// ExpiresIn is how long the code may be redeemed (default 7 days):
	// seconds, or a duration such as "168h".
	ExpiresIn RawValue `json:"expires_in,omitempty"`
}

// Invite is an invite's record; Code, its secret, is shown once, when it
// is made (the server keeps its hash).
type Invite struct {
	ID           string     `json:"id"`
	User         string     `json:"user"`
	Role         Role       `json:"role"`
	Projects     []string   `json:"projects,omitempty"`
	ProjectAdmin []string   `json:"project_admin,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	CreatedBy    string     `json:"created_by,omitempty"`
	ExpiresAt    time.Time  `json:"expires_at"`
	UsedAt       *time.Time `json:"used_at,omitempty"`
	Code         string     `json:"code,omitempty"`
}

// InviteRedeemRequest is POST /auth/invites/redeem: the invite's code
// for a token of its user.
type InviteRedeemRequest struct {
	Code string `json:"code"`
	LoginRequest
}

// NodeLoginRequest is POST /auth/login/node: an agent vouches for a
// local Unix account that connected to its login socket (it checked the
// caller's uid with SO_PEERCRED and the account's group). It carries the
// join token and the node's agent session, as the agent protocol does;
// the server trusts the agent for the accounts of its own node.
type NodeLoginRequest struct {
	NodeID string `json:"node_id"`
	User   string `json:"user"`
	UID    int    `json:"uid"`
}
