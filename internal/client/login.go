package client

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Signing in (api/login.go; docs/team.md, "Signing in").

// SocketLogin signs the calling process's Unix account in through the
// login socket at path (POST /login over the socket): the server (or
// agent) behind it knows the caller's uid from the kernel. The answer
// holds the token and, when the socket's server says, its address.
func SocketLogin(ctx context.Context, path string, req api.LoginRequest) (api.LoginAnswer, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	defer tr.CloseIdleConnections()
	c := New("http://login-socket", WithHTTPClient(&http.Client{Transport: tr}), WithUserAgent("corral-login"), WithTimeout(15*time.Second))
	var a api.LoginAnswer
	err := c.call(ctx, request{method: http.MethodPost, path: "/login", body: req}, &a)
	return a, err
}

// StartDevice starts a device sign-in (POST /auth/device; no token).
func (c *Client) StartDevice(ctx context.Context) (api.DeviceStart, error) {
	var d api.DeviceStart
	err := c.call(ctx, request{method: http.MethodPost, path: "/auth/device"}, &d)
	return d, err
}

// DeviceToken polls a device sign-in once (POST /auth/device/token): an
// *api.Error with code authorization_pending (409) until it is approved.
func (c *Client) DeviceToken(ctx context.Context, req api.DeviceTokenRequest) (api.LoginAnswer, error) {
	var a api.LoginAnswer
	err := c.call(ctx, request{method: http.MethodPost, path: "/auth/device/token", body: req}, &a)
	return a, err
}

// ApproveDevice approves a device sign-in's user code for the client's
// user (POST /auth/device/approve).
func (c *Client) ApproveDevice(ctx context.Context, userCode string) (api.DeviceApproved, error) {
	var a api.DeviceApproved
	err := c.call(ctx, request{method: http.MethodPost, path: "/auth/device/approve", body: api.DeviceApproveRequest{UserCode: userCode}}, &a)
	return a, err
}

// CreateInvite makes a single-use invite (POST /auth/invites, admin); the
// answer holds its code, shown once.
func (c *Client) CreateInvite(ctx context.Context, req api.InviteRequest) (api.Invite, error) {
	var inv api.Invite
	err := c.call(ctx, request{method: http.MethodPost, path: "/auth/invites", body: req}, &inv)
	return inv, err
}

// RedeemInvite trades an invite's code for a token of its user
// (POST /auth/invites/redeem; no token).
func (c *Client) RedeemInvite(ctx context.Context, req api.InviteRedeemRequest) (api.LoginAnswer, error) {
	var a api.LoginAnswer
	err := c.call(ctx, request{method: http.MethodPost, path: "/auth/invites/redeem", body: req}, &a)
	return a, err
}

// Logout revokes the client's own token (POST /auth/logout).
func (c *Client) Logout(ctx context.Context) (api.Token, error) {
	var t api.Token
	err := c.call(ctx, request{method: http.MethodPost, path: "/auth/logout"}, &t)
	return t, err
}
