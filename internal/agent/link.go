package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// HTTPLink is a Link over the server's agent API (/agent/v1/...), to one
// server or to the leader among several sharing a database: it starts
// with the address that answered last, follows a follower's 307 to the
// leader, and moves on to the next address when one cannot be connected
// to or answers that no server leads (the agent's loop tries again soon).
type HTTPLink struct {
	bases []string     // at least one, without a trailing slash
	cur   atomic.Int32 // index in bases of the server that answered last
	token string
	hc    *http.Client

	mu      sync.Mutex
	session string // from the last registration; sent on sync and logs
}

// NewHTTPLink returns a link to the server at base (http:// or https://)
// that presents the join token. caFile, when set, is a PEM bundle of the
// CAs to trust for HTTPS.
func NewHTTPLink(base, joinToken, caFile string) (*HTTPLink, error) {
	var bases []string
	for _, b := range strings.Split(base, ",") {
		b = strings.TrimRight(strings.TrimSpace(b), "/")
		if b == "" {
			return nil, fmt.Errorf("server address list %q has an empty entry", base)
		}
		if !strings.Contains(b, "://") {
			b = "http://" + b
		}
		bases = append(bases, b)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificates in it", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	l := &HTTPLink{bases: bases, token: joinToken}
	l.hc = &http.Client{Transport: tr, CheckRedirect: l.checkRedirect}
	return l, nil
}

// Base is the server's URL as the link uses it: every address it was
// given, comma-separated (the agent's identity as its jobs' owner).
func (l *HTTPLink) Base() string { return strings.Join(l.bases, ",") }

// current is the address the link tries first.
func (l *HTTPLink) current() string { return l.bases[int(l.cur.Load())%len(l.bases)] }

// checkRedirect sends the join token with a follower's 307 to the leader
// when the leader is one of the link's addresses (Go's client drops it on
// a redirect to another host), never to any other host.
func (l *HTTPLink) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if slices.Contains(l.bases, req.URL.Scheme+"://"+req.URL.Host) {
		req.Header.Set("Authorization", "Bearer "+l.token)
	}
	return nil
}

// Register implements Link.
func (l *HTTPLink) Register(ctx context.Context, r api.AgentRegistration) (api.AgentConfig, error) {
	var cfg api.AgentConfig
	err := l.post(ctx, "/agent/v1/register", r, &cfg, 30*time.Second)
	if err == nil {
		l.mu.Lock()
		l.session = cfg.Session
		l.mu.Unlock()
	}
	return cfg, err
}

// Sync implements Link; the call may be held by the server up to r.Wait.
func (l *HTTPLink) Sync(ctx context.Context, r api.AgentReport) (api.AgentWork, error) {
	var w api.AgentWork
	err := l.post(ctx, "/agent/v1/sync", r, &w, r.Wait.Duration()+30*time.Second)
	return w, err
}

// ShipLog implements Link.
func (l *HTTPLink) ShipLog(ctx context.Context, c api.LogChunk) error {
	return l.post(ctx, "/agent/v1/logs", c, nil, 30*time.Second)
}

func (l *HTTPLink) post(ctx context.Context, path string, in, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	start := int(l.cur.Load())
	for i := range l.bases {
		k := (start + i) % len(l.bases)
		err = l.postTo(ctx, k, path, body, out)
		if i+1 == len(l.bases) || !nextServer(err) {
			return err
		}
	}
	return err
}

// nextServer reports whether a try's error lets the link try its next
// address: the connection was never made, or no server leads there.
func nextServer(err error) bool {
	var op *net.OpError
	var e *api.Error
	return (errors.As(err, &op) && op.Op == "dial") || (errors.As(err, &e) && e.Status == http.StatusServiceUnavailable && e.Code == "no_leader")
}

func (l *HTTPLink) postTo(ctx context.Context, k int, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.bases[k]+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.token)
	l.mu.Lock()
	if l.session != "" {
		req.Header.Set(api.AgentSessionHeader, l.session)
	}
	l.mu.Unlock()
	resp, err := l.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		json.Unmarshal(data, &eb)
		e := &api.Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Field: eb.Error.Field}
		if e.Message == "" {
			e.Message = strings.TrimSpace(string(data))
		}
		if e.Code == "unknown_node" {
			return fmt.Errorf("%s: %w", path, ErrUnknownNode)
		}
		return fmt.Errorf("%s: %w", path, e)
	}
	// This server answered, or the leader it sent the request to did.
	if j := slices.Index(l.bases, resp.Request.URL.Scheme+"://"+resp.Request.URL.Host); j >= 0 {
		k = j
	}
	l.cur.Store(int32(k))
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
