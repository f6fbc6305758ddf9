package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// CreateToken makes a token (POST /auth/tokens, admin). The answer holds
// the secret, which the server never shows again.
func (c *Client) CreateToken(ctx context.Context, req api.TokenRequest) (api.NewToken, error) {
	var t api.NewToken
	err := c.call(ctx, request{method: http.MethodPost, path: "/auth/tokens", body: req}, &t)
	return t, err
}

// Tokens lists the tokens, never their secrets (GET /auth/tokens, admin).
func (c *Client) Tokens(ctx context.Context) (api.TokenList, error) {
	var l api.TokenList
	err := c.call(ctx, request{method: http.MethodGet, path: "/auth/tokens"}, &l)
	return l, err
}

// RevokeToken ends a token at once (DELETE /auth/tokens/{id}, admin).
func (c *Client) RevokeToken(ctx context.Context, id string) (api.Token, error) {
	p, err := pathID("token", id)
	if err != nil {
		return api.Token{}, err
	}
	var t api.Token
	err = c.call(ctx, request{method: http.MethodDelete, path: "/auth/tokens/" + p}, &t)
	return t, err
}

// Whoami says who the client's token belongs to (GET /auth/whoami).
func (c *Client) Whoami(ctx context.Context) (api.Whoami, error) {
	var w api.Whoami
	err := c.call(ctx, request{method: http.MethodGet, path: "/auth/whoami"}, &w)
	return w, err
}

// AuditFilter selects audit entries; zero fields match everything.
type AuditFilter struct {
	User   string
	Action string // exact, or a prefix ending in "." (job.)
	Since  time.Time
	Limit  int
}

// Audit reads the audit trail, newest first (GET /audit, admin).
func (c *Client) Audit(ctx context.Context, f AuditFilter) (api.AuditList, error) {
	q := url.Values{}
	if f.User != "" {
		q.Set("user", f.User)
	}
	if f.Action != "" {
		q.Set("action", f.Action)
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var l api.AuditList
	err := c.call(ctx, request{method: http.MethodGet, path: "/audit", query: q}, &l)
	return l, err
}
