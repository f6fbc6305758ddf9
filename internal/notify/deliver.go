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
	Client *http.Client // nil: NewClient(AllowLocal)
	// AllowLocal lets deliveries reach loopback, link-local and
	// unspecified addresses (--notify-allow-local: a receiver on the
	// server's own machine). Without it they are refused.
	AllowLocal bool
}

// NewHTTP returns an HTTP deliverer with its own client
// (NewClient(allowLocal)).
func NewHTTP(allowLocal bool) HTTP {
	return HTTP{Client: NewClient(allowLocal), AllowLocal: allowLocal}
}

func (h HTTP) client() *http.Client {
	if h.Client != nil {
		return h.Client
	}
	return NewClient(h.AllowLocal)
}

// NewClient is the HTTP client of deliveries: HTTPTimeout, no proxy, no
// redirects, and no connection to a loopback, link-local, multicast or
// unspecified address unless allowLocal (a user who registers an
// endpoint must not reach the server's own ports, nor a cloud's metadata
// service at 169.254.169.254). The check is made on every address the
// host resolves to, as it is dialed (a name that resolves to a public
// address when registered and to a loopback one later is refused then).
func NewClient(allowLocal bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: HTTPTimeout, Control: func(network, address string, _ syscall.RawConn) error {
		return refuseLocal(address, allowLocal)
	}}
	tr.DialContext = d.DialContext
	tr.Proxy = nil
	return &http.Client{Timeout: HTTPTimeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// refuseLocal refuses a connection to address (IP:port, as dialed) when
// its IP is one notifications are not sent to. Multicast is refused even
// with allowLocal.
func refuseLocal(address string, allowLocal bool) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	if why := localAddress(ip, allowLocal); why != "" {
		return Permanent{fmt.Errorf("notifications are not sent to %s (%s)", ip.Unmap(), why)}
	}
	return nil
}

// localAddress says why notifications are not sent to ip, or "" when
// they may be.
func localAddress(ip netip.Addr, allowLocal bool) string {
	ip = ip.Unmap()
	switch {
	case ip.IsMulticast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast():
		return "a multicast address"
	case allowLocal:
		return ""
	case ip.IsLoopback():
		return "a loopback address; the server's --notify-allow-local allows it"
	case ip.IsLinkLocalUnicast():
		return "a link-local address; the server's --notify-allow-local allows it"
	case ip.IsUnspecified():
		return "an unspecified address; the server's --notify-allow-local allows it"
	}
	return ""
}

// errNoAnswer is every failure to get an HTTP answer from an endpoint
// (refused, reset, timed out, not HTTP, a bad certificate): one text, so
// that what a caller reads back (the delivery log, the endpoint test)
// does not tell an open port from a closed one. The cause is logged.
var errNoAnswer = errors.New("POST to the endpoint failed: no HTTP answer (the connection was refused, reset or timed out, or the other end does not speak HTTP or TLS as expected)")

// noAnswer is errNoAnswer with its cause, which only the log shows.
type noAnswer struct{ cause string }

func (noAnswer) Error() string        { return errNoAnswer.Error() }
func (noAnswer) Is(target error) bool { return target == errNoAnswer }

// Cause is what the server's log shows of a delivery error: its cause
// where the error itself is kept uniform.
func Cause(err error) string {
	var na noAnswer
	if errors.As(err, &na) {
		return na.cause
	}
	if err == nil {
		return ""
	}
	return err.Error()
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
		// The error names the URL, which is a secret, and its text would
		// tell an open port from a closed one: one text for all, the
		// cause for the log.
		return noAnswer{cause: httpErrorText(ctx, err)}
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
