// Package client is a Go client for Corral's HTTP API (see SPEC.md). The CLI
// uses it; so can scripts and other programs. Every method takes a context
// first and returns the API's wire types from package api.
//
// Errors: an answer with a non-2xx status comes back as an *api.Error (match
// it with errors.Is against api.ErrNotFound and friends, or errors.As); a
// server that cannot be reached at all comes back as an error wrapping
// ErrUnreachable.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// DefaultServer is the address a Corral server listens on unless told
// otherwise.
const DefaultServer = "http://127.0.0.1:7450"

// DefaultTimeout bounds each request that answers with a JSON document (logs
// are not bounded, so that following them can last as long as the job).
const DefaultTimeout = 30 * time.Second

// dialTimeout bounds connecting to the server, for every request.
const dialTimeout = 5 * time.Second

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 1 << 20

// ErrUnreachable is wrapped by the error of any request that could not reach
// the server: connection refused, unknown host, timeouts.
var ErrUnreachable = errors.New("cannot reach the Corral server")

// Client talks to a Corral server, or to the leader among several
// (servers.go). It is safe for concurrent use.
type Client struct {
	bases        []string     // normalized, without a trailing slash; at least one
	cur          atomic.Int32 // index in bases of the server that answered last
	baseErr      error        // why the addresses could not be parsed; returned by every call
	http         *http.Client
	token        string
	timeout      time.Duration
	failoverWait time.Duration
	agent        string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc instead of its
// own *http.Client.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithToken sends token as "Authorization: Bearer TOKEN" on every request.
// An empty token sends no Authorization header.
func WithToken(token string) Option {
	return func(c *Client) { c.token = strings.TrimSpace(token) }
}

// WithTimeout bounds each JSON request (connecting, sending and reading the
// answer) at d instead of DefaultTimeout; zero means no bound beyond the
// context's. Logs are never bounded.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.agent = ua }
}

// New returns a client for the server at baseURL (see NormalizeServerURL for
// what it accepts; empty means DefaultServer), or for the servers of a
// comma-separated list of them (servers.go). If baseURL cannot be read,
// every call returns that error.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{timeout: DefaultTimeout, failoverWait: DefaultFailoverWait, agent: "corral-client"}
	c.bases, c.baseErr = NormalizeServerURLs(baseURL)
	if c.baseErr != nil {
		c.bases = []string{strings.TrimSpace(baseURL)}
	}
	for _, o := range opts {
		o(c)
	}
	hc := &http.Client{Transport: newTransport()}
	if c.http != nil {
		hc = new(http.Client)
		*hc = *c.http // a copy: the caller's client is not changed
	}
	hc.CheckRedirect = c.checkRedirect
	c.http = hc
	return c
}

// newTransport is http.DefaultTransport with a short connect timeout, so that
// a server that is down is reported quickly even when following logs.
func newTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.ExpectContinueTimeout = 5 * time.Second
	return t
}

// askFirstBytes is the body size above which a request asks the server
// before sending it (Expect: 100-continue), as curl does.
const askFirstBytes = 64 << 10

// BaseURL returns the server address the client talks to, normalized: of
// several, the one that answered last.
func (c *Client) BaseURL() string { return c.baseNow() }

// NormalizeServerURL turns a server address as people type it into a base
// URL: "host:port" and ":port" get "http://" (":port" means 127.0.0.1), and
// a trailing slash is dropped. Empty means DefaultServer. Only http and https
// are accepted.
func NormalizeServerURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultServer, nil
	}
	if strings.HasPrefix(s, ":") {
		s = "127.0.0.1" + s
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("server address %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("server address %q: scheme must be http or https", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("server address %q has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("server address %q must not have a query or fragment", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// unreachableError is the error of a request that never got an answer.
type unreachableError struct {
	server string
	reason string
	cause  error
	dial   bool // the connection was never made (servers.go moves on)
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the Corral server at %s (%s); start one with \"corral up\", or point CORRAL_SERVER or --server at it", e.server, e.reason)
}

// Unwrap lets errors.Is match both ErrUnreachable and the network error.
func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.cause} }

// request is one HTTP call.
type request struct {
	method string
	path   string // escaped, starting with "/"
	query  url.Values
	body   any // marshaled as JSON when not nil
	header http.Header
	stream bool // no timeout: the answer may last as long as a job
}

// send performs r and returns the response of a 2xx answer, which the caller
// must close. Any other answer is returned as an *api.Error.
func (c *Client) send(ctx context.Context, r request) (*http.Response, context.CancelFunc, error) {
	if c.baseErr != nil {
		return nil, nil, c.baseErr
	}
	var body []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding %s %s: %w", r.method, r.path, err)
		}
		body = b
	}
	return c.sendAny(ctx, r, body) // servers.go
}

// sendTo is send to the server at base.
func (c *Client) sendTo(ctx context.Context, base string, r request, b []byte) (*http.Response, context.CancelFunc, error) {
	target := base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if b != nil {
		body = bytes.NewReader(b) // NewRequest sets GetBody: a 307 re-sends it
	}
	parent := ctx
	cancel := context.CancelFunc(func() {})
	if !r.stream && c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	for k, vs := range r.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(b) > askFirstBytes {
		// The server refuses a body too large unread and closes the
		// connection; asking first gets its answer rather than a reset.
		req.Header.Set("Expect", "100-continue")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if c.agent != "" {
		req.Header.Set("User-Agent", c.agent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, nil, c.transportError(parent, base, r, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer resp.Body.Close()
		return nil, nil, decodeError(resp)
	}
	return resp, cancel, nil
}

// call performs r and decodes a JSON answer into out (when not nil).
func (c *Client) call(ctx context.Context, r request, out any) error {
	resp, cancel, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ue := c.transportError(ctx, c.baseNow(), r, err); errors.Is(ue, ErrUnreachable) {
			return ue
		}
		return fmt.Errorf("reading the answer to %s %s: %w", r.method, r.path, err)
	}
	return nil
}

// transportError explains an error that left no HTTP answer. ctx is the
// caller's context: when it is done, its error is what matters.
func (c *Client) transportError(ctx context.Context, base string, r request, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", r.method, r.path, ctx.Err())
	}
	reason := ""
	var nerr net.Error
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused"
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		reason = "unknown host " + dnsErr.Name
	case errors.As(err, &dnsErr):
		reason = "cannot resolve " + dnsErr.Name + ": " + dnsErr.Err
	case errors.Is(err, syscall.EHOSTUNREACH):
		reason = "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH):
		reason = "network unreachable"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout()):
		reason = "timed out"
		if !r.stream && c.timeout > 0 {
			reason += " after " + c.timeout.String()
		}
	case errors.As(err, &opErr) && opErr.Op == "dial":
		reason = opErr.Err.Error()
	}
	if reason == "" {
		return fmt.Errorf("%s %s on the Corral server at %s: %w", r.method, r.path, base, err)
	}
	// The connection was never made: nothing reached the server.
	dial := (errors.As(err, &opErr) && opErr.Op == "dial") || errors.As(err, &dnsErr) || errors.Is(err, syscall.ECONNREFUSED)
	return &unreachableError{server: base, reason: reason, cause: err, dial: dial}
}

// decodeError turns a non-2xx answer into an *api.Error, from the API's
// {"error": {...}} body when there is one, from the raw body text otherwise.
func decodeError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &api.Error{Status: resp.StatusCode}
	var body api.ErrorBody
	if err := json.Unmarshal(raw, &body); err == nil && (body.Error.Code != "" || body.Error.Message != "") {
		e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
		if e.Message == "" {
			e.Message = body.Error.Code
		}
		return e
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 500 {
		text = text[:500] + "..."
	}
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	if text == "" {
		text = "HTTP " + strconv.Itoa(resp.StatusCode)
	}
	e.Message = text
	return e
}

// pathID escapes an id for use as one path segment.
func pathID(kind, id string) (string, error) {
	if strings.TrimSpace(id) == "" {
		return "", fmt.Errorf("%s id is empty", kind)
	}
	return url.PathEscape(id), nil
}
