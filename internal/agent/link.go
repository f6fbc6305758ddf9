package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// HTTPLink is a Link over the server's agent API (/agent/v1/...).
type HTTPLink struct {
	base  string
	token string
	hc    *http.Client

	mu      sync.Mutex
	session string // from the last registration; sent on sync and logs
}

// NewHTTPLink returns a link to the server at base (http:// or https://)
// that presents the join token. caFile, when set, is a PEM bundle of the
// CAs to trust for HTTPS.
func NewHTTPLink(base, joinToken, caFile string) (*HTTPLink, error) {
	base = strings.TrimRight(base, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
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
	return &HTTPLink{base: base, token: joinToken, hc: &http.Client{Transport: tr}}, nil
}

// Base is the server's URL as the link uses it.
func (l *HTTPLink) Base() string { return l.base }

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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.base+path, bytes.NewReader(body))
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
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
