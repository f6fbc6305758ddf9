// Package tunnel carries shells and port streams from the Corral server
// to the node that runs a job.
//
// The server's Hub knows two kinds of node. The in-process node of
// `corral up` is called directly (SetLocal). A remote agent keeps one
// control WebSocket open to the server (GET /agent/v1/tunnel, with the
// join token and its node session); to open a stream, the Hub sends the
// agent a Request on it, and the agent dials a data WebSocket back
// (GET /agent/v1/tunnel?session=ID) that carries the stream. Only the
// agent holding the node's session may dial either, so a stream for node
// X is only ever served by X's agent.
//
//	CLI --ws--> server --control ws--> agent of node X
//	                   <--data ws----- (one per shell or port stream)
package tunnel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/shellproto"
)

// ReadLimit bounds one WebSocket message of a tunnel (a frame of the
// shell protocol, header included, fits).
const ReadLimit = shellproto.MaxPayload + 1024

// dialBack bounds how long the Hub waits for an agent to dial a stream
// back.
const dialBack = 15 * time.Second

// ErrNoTunnel: the node has no tunnel to this server (not connected, or
// an agent too old to have one).
var ErrNoTunnel = errors.New("the node has no tunnel to this server")

// ErrNoTask: the job's task the request names does not run on the node
// (it ended, or is stopping).
var ErrNoTask = errors.New("the job's task does not run on this node")

// Node is a node that serves shells and port streams in process (the
// agent of `corral up`; *agent.Agent implements it).
type Node interface {
	// ServeShell runs the request's shell and relays it over conn
	// (shellproto frames) until it ends; it closes conn.
	ServeShell(ctx context.Context, req shellproto.Request, conn io.ReadWriteCloser) error
	// DialPort connects to the request's loopback port for its job.
	DialPort(ctx context.Context, req shellproto.Request) (net.Conn, error)
}

// Hub opens streams to nodes. Safe for concurrent use.
type Hub struct {
	mu      sync.Mutex
	local   map[string]Node
	control map[string]*control       // node id -> its agent's control channel
	pending map[string]*pendingStream // session -> a stream waiting for its dial-back
}

type control struct {
	c  *websocket.Conn
	mu sync.Mutex // one writer at a time
}

type pendingStream struct {
	node string
	got  chan dialed   // unbuffered: the stream is handed over, or not at all
	done chan struct{} // closed when Open stops waiting
}

type dialed struct {
	conn net.Conn
	err  error
}

// NewHub returns a Hub with no nodes.
func NewHub() *Hub {
	return &Hub{local: map[string]Node{}, control: map[string]*control{}, pending: map[string]*pendingStream{}}
}

// SetLocal serves node id's streams in process with n.
func (h *Hub) SetLocal(id string, n Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.local[id] = n
}

// Open returns a stream to what req asks for on node: for KindShell, a
// stream of shellproto frames to the shell (its first frames may say it
// could not start); for KindPort, the TCP stream to the port. The caller
// closes it; closing a shell's stream hangs the shell up.
func (h *Hub) Open(ctx context.Context, node string, req shellproto.Request) (net.Conn, error) {
	h.mu.Lock()
	local := h.local[node]
	ctl := h.control[node]
	h.mu.Unlock()
	if local != nil {
		if req.Kind == shellproto.KindPort {
			return local.DialPort(ctx, req)
		}
		mine, theirs := net.Pipe()
		go local.ServeShell(context.WithoutCancel(ctx), req, theirs)
		return mine, nil
	}
	if ctl == nil {
		return nil, fmt.Errorf("node %s: %w", node, ErrNoTunnel)
	}
	var b [16]byte
	rand.Read(b[:])
	req.Session = hex.EncodeToString(b[:])
	p := &pendingStream{node: node, got: make(chan dialed), done: make(chan struct{})}
	h.mu.Lock()
	h.pending[req.Session] = p
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.pending, req.Session)
		h.mu.Unlock()
		close(p.done) // a stream dialed back too late is closed by ServeData
	}()
	raw, _ := json.Marshal(req)
	wctx, cancel := context.WithTimeout(ctx, dialBack)
	defer cancel()
	ctl.mu.Lock()
	err := ctl.c.Write(wctx, websocket.MessageText, raw)
	ctl.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("node %s: ask its agent: %w", node, err)
	}
	select {
	case d := <-p.got:
		return d.conn, d.err
	case <-wctx.Done():
		return nil, fmt.Errorf("node %s: its agent did not connect back within %s: %w", node, dialBack, wctx.Err())
	}
}

// ServeControl holds node's control channel c until it fails or ctx
// ends; a newer channel of the node replaces it.
func (h *Hub) ServeControl(ctx context.Context, node string, c *websocket.Conn) {
	ctl := &control{c: c}
	h.mu.Lock()
	old := h.control[node]
	h.control[node] = ctl
	h.mu.Unlock()
	if old != nil {
		old.c.Close(websocket.StatusGoingAway, "replaced by a newer tunnel of the node")
	}
	defer func() {
		h.mu.Lock()
		if h.control[node] == ctl {
			delete(h.control, node)
		}
		h.mu.Unlock()
	}()
	// The agent sends nothing on it: reading serves pings and notices
	// the close. Pings find a dead peer.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(20 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pc := context.WithTimeout(ctx, 10*time.Second)
				err := c.Ping(pctx)
				pc()
				if err != nil {
					c.Close(websocket.StatusGoingAway, "ping failed")
					return
				}
			}
		}
	}()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			return
		}
	}
}

// ServeData hands the data channel c, dialed back by node's agent for
// session, to the Open that waits for it, and returns when the stream is
// closed (or at once, with an error, when no Open of that node waits).
// failure, when not empty, is the agent's reason it could not open the
// stream (a refused port).
func (h *Hub) ServeData(ctx context.Context, node, session, failure string, c *websocket.Conn) error {
	h.mu.Lock()
	p := h.pending[session]
	if p != nil && p.node == node {
		delete(h.pending, session)
	}
	h.mu.Unlock()
	if p == nil || p.node != node {
		c.Close(websocket.StatusPolicyViolation, "no such stream for this node")
		return fmt.Errorf("node %s: no stream %q waits for it", node, session)
	}
	if failure != "" {
		c.Close(websocket.StatusNormalClosure, "")
		select {
		case p.got <- dialed{err: errors.New(failure)}:
		case <-p.done:
		}
		return nil
	}
	c.SetReadLimit(ReadLimit)
	closed := make(chan struct{})
	nc := &closeNotify{Conn: websocket.NetConn(context.WithoutCancel(ctx), c, websocket.MessageBinary), closed: closed}
	select {
	case p.got <- dialed{conn: nc}:
	case <-p.done: // Open gave up waiting
		nc.Close()
		return nil
	}
	select {
	case <-closed:
	case <-ctx.Done():
		nc.Close()
	}
	return nil
}

// closeNotify is a net.Conn that says when it is closed.
type closeNotify struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}
