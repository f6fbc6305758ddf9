package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Several servers share one PostgreSQL database, one of them leading
// (docs/store.md, "Fail-over"). A client given all their addresses
// (CORRAL_SERVER=http://a:7450,http://b:7450) finds the leader: it starts
// with the address that answered last, follows a follower's 307 to the
// leader (the request's method, body and token with it), and moves on to
// the next address when one cannot be connected to or answers 503 because
// no server leads, for up to FailoverWait.

// DefaultFailoverWait is how long a client with several server addresses
// keeps trying them while none leads (a fail-over takes about the 9 s
// lease TTL).
const DefaultFailoverWait = 30 * time.Second

// NormalizeServerURLs splits a comma-separated list of server addresses
// and normalizes each (NormalizeServerURL); empty means DefaultServer.
// Duplicates are dropped.
func NormalizeServerURLs(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return []string{DefaultServer}, nil
	}
	var out []string
	for i, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			return nil, fmt.Errorf("server address %d of %q is empty", i+1, s)
		}
		u, err := NormalizeServerURL(part)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out, nil
}

// WithFailoverWait bounds how long a client with several server addresses
// keeps trying them while none can be reached or none leads (default
// DefaultFailoverWait). A client with one address never waits.
func WithFailoverWait(d time.Duration) Option {
	return func(c *Client) { c.failoverWait = d }
}

// Servers returns every server address the client knows, normalized.
func (c *Client) Servers() []string { return slices.Clone(c.bases) }

// baseNow is the address the client tries first: the one that answered last.
func (c *Client) baseNow() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// movedOn reports whether an error of one server's try lets the client
// try the next: the request cannot have been carried out there (the
// connection was never made), or the server says no server leads.
func movedOn(err error) bool {
	var ue *unreachableError
	if errors.As(err, &ue) {
		return ue.dial
	}
	var ae *api.Error
	return errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable && ae.Code == "no_leader"
}

// replayable reports whether r may be sent again to another server after
// it failed on the way (the connection broke after it was sent, a
// timeout): a read, or a change under an Idempotency-Key, which the
// leader answers with the first outcome if the first try got through.
func replayable(r request) bool {
	return r.method == http.MethodGet || r.header.Get("Idempotency-Key") != ""
}

// isAPIError reports whether err is a server's answer (not a failure to
// get one).
func isAPIError(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae)
}

// sendAny is send over the client's addresses (see above).
func (c *Client) sendAny(ctx context.Context, r request, body []byte) (*http.Response, context.CancelFunc, error) {
	if len(c.bases) == 1 {
		return c.sendTo(ctx, c.bases[0], r, body)
	}
	deadline := time.Now().Add(c.failoverWait)
	for {
		start := int(c.cur.Load())
		var last error
		var wait time.Duration
		for i := range c.bases {
			k := (start + i) % len(c.bases)
			resp, cancel, err := c.sendTo(ctx, c.bases[k], r, body)
			if err == nil {
				if resp.Request != nil && resp.Request.URL != nil { // after a 307, the leader
					if j := slices.Index(c.bases, origin(resp.Request.URL.Scheme, resp.Request.URL.Host)); j >= 0 {
						k = j
					}
				}
				c.cur.Store(int32(k))
				return resp, cancel, nil
			}
			if ctx.Err() != nil || !(movedOn(err) || (replayable(r) && !isAPIError(err))) {
				return nil, nil, err
			}
			last = err
			var ae *api.Error
			if errors.As(err, &ae) {
				wait = max(wait, time.Second) // Retry-After: 1
			}
		}
		if ctx.Err() != nil || !time.Now().Add(wait).Before(deadline) {
			return nil, nil, fmt.Errorf("none of the %d Corral servers (%s) answered as the leader within %s: %w", len(c.bases), strings.Join(c.bases, ", "), c.failoverWait, last)
		}
		t := time.NewTimer(max(wait, 200*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, fmt.Errorf("%s %s: %w", r.method, r.path, ctx.Err())
		case <-t.C:
		}
	}
}

// origin is scheme://host of a URL, as the client's addresses are written.
func origin(scheme, host string) string { return scheme + "://" + host }

// checkRedirect lets the client follow a follower's 307 to the leader: the
// token goes with it to an address the client was given (Go's client
// drops it on a redirect to another host), never to any other host.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if c.token != "" && slices.Contains(c.bases, origin(req.URL.Scheme, req.URL.Host)) {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return nil
}
