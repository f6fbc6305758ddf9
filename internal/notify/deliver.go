package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Deliverer sends one message to one endpoint. An error means it was not
// accepted (the sender retries); Permanent errors are not retried.
type Deliverer interface {
	Deliver(ctx context.Context, t Target, m Message) error
}

// Permanent marks a delivery error that retrying cannot fix (the endpoint
// answered 4xx other than 408 and 429, or email is not configured).
type Permanent struct{ Err error }

func (p Permanent) Error() string { return p.Err.Error() }
func (p Permanent) Unwrap() error { return p.Err }

// SignatureHeader carries a webhook body's HMAC: "sha256=" and the hex
// HMAC-SHA256 of the exact body bytes under the endpoint's secret.
const SignatureHeader = "X-Corral-Signature"

// EventIDHeader repeats the body's event_id.
const EventIDHeader = "X-Corral-Event-Id"

// Sign returns the X-Corral-Signature value of body under secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether sig is body's signature under secret (constant
// time): what a receiver does.
func Verify(secret string, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(sig))
}

// HTTPTimeout bounds one webhook or Slack delivery.
const HTTPTimeout = 10 * time.Second

// HTTP delivers to Slack incoming webhooks and generic webhooks.
type HTTP struct {
	Client *http.Client // nil: one with HTTPTimeout and no redirects
}

// NewHTTP returns an HTTP deliverer with its own client (NewClient).
func NewHTTP() HTTP { return HTTP{Client: NewClient()} }

func (h HTTP) client() *http.Client {
	if h.Client != nil {
		return h.Client
	}
	return NewClient()
}

// NewClient is the HTTP client of deliveries: HTTPTimeout, no proxy, no
// redirects, and no connection to a link-local address (a cloud's
// metadata service, 169.254.169.254, must not be reachable through an
// endpoint a user registers).
func NewClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: HTTPTimeout, Control: refuseLinkLocal}
	tr.DialContext = d.DialContext
	tr.Proxy = nil
	return &http.Client{Timeout: HTTPTimeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// refuseLinkLocal refuses a connection to a link-local or unspecified
// address, checked on the address actually dialed (after DNS).
func refuseLinkLocal(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() {
		return Permanent{fmt.Errorf("notifications are not sent to %s (a link-local, multicast or unspecified address)", ip)}
	}
	return nil
}

// Deliver POSTs the message: a webhook gets WebhookBody, signed; Slack
// gets SlackBody. A 2xx answer is delivered.
func (h HTTP) Deliver(ctx context.Context, t Target, m Message) error {
	var body []byte
	var err error
	switch t.Kind {
	case api.EndpointSlack:
		body, err = SlackBody(m)
	case api.EndpointWebhook:
		body, err = WebhookBody(m)
	default:
		return Permanent{fmt.Errorf("HTTP cannot deliver to a %s endpoint", t.Kind)}
	}
	if err != nil {
		return Permanent{err}
	}
	ctx, cancel := context.WithTimeout(ctx, HTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return Permanent{errors.New("the endpoint's URL is not usable")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "corral-notify")
	req.Header.Set(EventIDHeader, m.EventID)
	if t.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(t.Secret, body))
	}
	resp, err := h.client().Do(req)
	var p Permanent
	if errors.As(err, &p) {
		return p
	}
	if err != nil {
		// The error names the URL, which is a secret: say what failed
		// without it.
		return fmt.Errorf("POST to the endpoint failed: %s", httpErrorText(ctx, err))
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return Permanent{fmt.Errorf("the endpoint answered %s", resp.Status)}
	}
	return fmt.Errorf("the endpoint answered %s", resp.Status)
}

func httpErrorText(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "no answer within " + HTTPTimeout.String()
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return ue.Unwrap().Error()
	}
	return "connection error"
}

// Router sends each endpoint kind through its deliverer.
type Router map[string]Deliverer

// Deliver sends m through t's kind's deliverer.
func (r Router) Deliver(ctx context.Context, t Target, m Message) error {
	d, ok := r[t.Kind]
	if !ok || d == nil {
		return Permanent{fmt.Errorf("this server cannot send %s notifications (for email, start it with --smtp)", t.Kind)}
	}
	return d.Deliver(ctx, t, m)
}
