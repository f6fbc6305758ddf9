package agent

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/shellproto"
	"github.com/corral-sched/corral/internal/tunnel"
)

// TunnelPath is the agent route of the tunnel (package tunnel): the
// control channel without a session, a stream's data channel with one.
const TunnelPath = "/agent/v1/tunnel"

// TunnelDialer is a Link that can open the tunnel's WebSockets to the
// server (HTTPLink). The in-process agent of `corral up` has none: the
// server calls it directly.
type TunnelDialer interface {
	// DialTunnel opens the tunnel route for node: the control channel
	// (session ""), or the data channel of a stream; failure, when set,
	// tells the server why the stream could not be opened.
	DialTunnel(ctx context.Context, node, session, failure string) (*websocket.Conn, error)
}

// DialTunnel implements TunnelDialer with the join token and the node's
// session, as the other agent routes.
func (l *HTTPLink) DialTunnel(ctx context.Context, node, session, failure string) (*websocket.Conn, error) {
	q := url.Values{"node_id": {node}}
	if session != "" {
		q.Set("session", session)
	}
	if failure != "" {
		q.Set("failure", failure)
	}
	h := http.Header{"Authorization": {"Bearer " + l.token}}
	l.mu.Lock()
	if l.session != "" {
		h.Set(api.AgentSessionHeader, l.session)
	}
	l.mu.Unlock()
	c, _, err := websocket.Dial(ctx, l.current()+TunnelPath+"?"+q.Encode(), &websocket.DialOptions{HTTPClient: l.hc, HTTPHeader: h})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(tunnel.ReadLimit)
	return c, nil
}

// tunnelLoop keeps the control channel open once the agent has
// registered, and serves each stream the server asks for on it.
func (a *Agent) tunnelLoop(ctx context.Context, td TunnelDialer) {
	select {
	case <-a.registered:
	case <-ctx.Done():
		return
	}
	backoff := time.Second
	for ctx.Err() == nil {
		c, err := td.DialTunnel(ctx, a.cfg.NodeID, "", "")
		if err != nil {
			a.log.Debug("tunnel: control channel not open; retrying", "err", err, "in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = time.Second
		a.log.Debug("tunnel: control channel open")
		for {
			_, raw, err := c.Read(ctx)
			if err != nil {
				break
			}
			var req shellproto.Request
			if json.Unmarshal(raw, &req) != nil || req.Session == "" {
				continue
			}
			go a.serveStream(ctx, td, req)
		}
		c.CloseNow()
	}
}

// serveStream dials the stream's data channel back and serves req on it.
func (a *Agent) serveStream(ctx context.Context, td TunnelDialer, req shellproto.Request) {
	log := a.log.With("job_id", req.JobID, "kind", req.Kind)
	switch req.Kind {
	case shellproto.KindShell:
		c, err := td.DialTunnel(ctx, a.cfg.NodeID, req.Session, "")
		if err != nil {
			log.Warn("tunnel: could not dial the stream back", "err", err)
			return
		}
		a.ServeShell(ctx, req, websocket.NetConn(ctx, c, websocket.MessageBinary))
	case shellproto.KindPort:
		pc, err := a.DialPort(ctx, req)
		if err != nil {
			msg := err.Error()
			if len(msg) > 200 {
				msg = msg[:200]
			}
			if c, err := td.DialTunnel(ctx, a.cfg.NodeID, req.Session, strings.ToValidUTF8(msg, "?")); err == nil {
				c.CloseNow()
			}
			return
		}
		c, err := td.DialTunnel(ctx, a.cfg.NodeID, req.Session, "")
		if err != nil {
			pc.Close()
			log.Warn("tunnel: could not dial the stream back", "err", err)
			return
		}
		splice(websocket.NetConn(ctx, c, websocket.MessageBinary), pc)
	}
}

// splice copies both ways between a and b until either side ends, then
// closes both.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}
