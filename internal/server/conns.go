package server

import (
	"container/list"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ConnLimits bound the connections of the API's listener (corral up and
// corral server: --read-timeout, --write-timeout, --idle-timeout,
// --max-unauthenticated-conns). A zero duration is no bound.
type ConnLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, for
	// every caller (the notebook proxy's uploads excepted: for its
	// owner, it bounds each stall of the upload instead).
	ReadTimeout time.Duration
	// WriteTimeout bounds the answer, from the end of the request's
	// headers. Once the caller has presented a valid token (or agents
	// their join token) it bounds each write instead, so that streams
	// (GET /events, a followed log, agents' long polls, the notebook
	// proxy) last as long as they are read.
	WriteTimeout time.Duration
	// IdleTimeout bounds a keep-alive connection between requests.
	IdleTimeout time.Duration
	// MaxUnauthenticated caps the connections open that have not yet
	// presented a valid token: past it, the oldest of them is closed to
	// make room for the new one. 0: no cap.
	MaxUnauthenticated int
}

// DefaultConnLimits returns the flags' defaults.
func DefaultConnLimits() ConnLimits {
	return ConnLimits{
		ReadHeaderTimeout:  10 * time.Second,
		ReadTimeout:        60 * time.Second,
		WriteTimeout:       60 * time.Second,
		IdleTimeout:        2 * time.Minute,
		MaxUnauthenticated: 1024,
	}
}

// Conns applies ConnLimits to an http.Server and keeps the list of its
// connections that have not yet presented a valid token, oldest first. It
// is safe for concurrent use.
type Conns struct {
	limits ConnLimits
	log    *slog.Logger

	mu        sync.Mutex
	byConn    map[net.Conn]*trackedConn
	strangers list.List // of *trackedConn: not yet authenticated, oldest first
	evicted   int64
}

// trackedConn is one connection of the listener.
type trackedConn struct {
	c        net.Conn
	stranger *list.Element // in Conns.strangers; nil once authenticated
}

type connKey struct{}

// NewConns returns the guard of a listener's connections.
func NewConns(l ConnLimits, logger *slog.Logger) *Conns {
	if logger == nil {
		logger = slog.Default()
	}
	return &Conns{limits: l, log: logger, byConn: map[net.Conn]*trackedConn{}}
}

// Configure sets srv's timeouts and its connection hooks (ConnContext,
// ConnState); srv must not have hooks of its own.
func (cs *Conns) Configure(srv *http.Server) {
	srv.ReadHeaderTimeout = cs.limits.ReadHeaderTimeout
	srv.ReadTimeout = cs.limits.ReadTimeout
	srv.WriteTimeout = cs.limits.WriteTimeout
	srv.IdleTimeout = cs.limits.IdleTimeout
	srv.ConnContext = cs.connContext
	srv.ConnState = cs.connState
}

// connContext registers a new connection as a stranger; past the cap, the
// oldest strangers are closed.
func (cs *Conns) connContext(ctx context.Context, c net.Conn) context.Context {
	tc := &trackedConn{c: c}
	var victims []net.Conn
	cs.mu.Lock()
	cs.byConn[c] = tc
	tc.stranger = cs.strangers.PushBack(tc)
	for max := cs.limits.MaxUnauthenticated; max > 0 && cs.strangers.Len() > max; {
		old := cs.strangers.Remove(cs.strangers.Front()).(*trackedConn)
		old.stranger = nil
		victims = append(victims, old.c)
		cs.evicted++
	}
	evicted := cs.evicted
	cs.mu.Unlock()
	for _, v := range victims {
		// A TLS close may write an alert: not on the accept loop.
		go v.Close()
	}
	if len(victims) > 0 && (evicted&(evicted-1)) == 0 { // 1, 2, 4, 8...: a log line, not a flood
		cs.log.Warn("too many connections without a valid token; closed the oldest",
			"max_unauthenticated_conns", cs.limits.MaxUnauthenticated, "closed_so_far", evicted, "remote", c.RemoteAddr().String())
	}
	return context.WithValue(ctx, connKey{}, tc)
}

// connState forgets a connection once it is closed or hijacked (a
// WebSocket, after its caller was authenticated).
func (cs *Conns) connState(c net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if tc, ok := cs.byConn[c]; ok {
		if tc.stranger != nil {
			cs.strangers.Remove(tc.stranger)
			tc.stranger = nil
		}
		delete(cs.byConn, c)
	}
}

// authenticated marks the connection of ctx as one whose caller presented
// a valid token: it no longer counts toward MaxUnauthenticated.
func (cs *Conns) authenticated(ctx context.Context) {
	if cs == nil {
		return
	}
	tc, ok := ctx.Value(connKey{}).(*trackedConn)
	if !ok {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if tc.stranger != nil {
		cs.strangers.Remove(tc.stranger)
		tc.stranger = nil
	}
}

// Strangers is how many connections are open that have not presented a
// valid token.
func (cs *Conns) Strangers() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.strangers.Len()
}

// WithConns makes the server mark connections whose callers authenticate
// (cs's cap then spares them) and bound an authenticated caller's answer
// by each write's stall rather than its whole length.
func WithConns(cs *Conns) Option {
	return func(s *Server) { s.conns = cs }
}

// writeStall is how long one write of an authenticated caller's answer
// may take; 0: no bound.
func (cs *Conns) writeStall() time.Duration {
	if cs == nil {
		return 0
	}
	return cs.limits.WriteTimeout
}

// authenticated records that r's caller presented a valid token (an API
// token, a dashboard session or the agents' join token).
func (s *Server) authenticated(r *http.Request) {
	if c, ok := r.Context().Value(callKey{}).(*callInfo); ok {
		c.authed = true
	}
	s.conns.authenticated(r.Context())
}

// stallReader extends the connection's read deadline before each read, so
// that a long upload is bounded by its stalls rather than its length. Once
// the body has ended it sets no deadline: the server then reads the
// connection in the background, with none, to see the client go away, and
// a deadline would end the request when it passed.
type stallReader struct {
	io.ReadCloser
	rc    *http.ResponseController
	stall time.Duration
	ended bool
}

func (b *stallReader) Read(p []byte) (int, error) {
	if b.ended {
		return b.ReadCloser.Read(p)
	}
	b.rc.SetReadDeadline(time.Now().Add(b.stall))
	n, err := b.ReadCloser.Read(p)
	b.ended = err != nil
	return n, err
}

// streamBody returns r's body, bounded by each read's stall instead of
// the whole request's ReadTimeout (an authenticated upload through the
// notebook proxy).
func (s *Server) streamBody(w http.ResponseWriter, r *http.Request) io.ReadCloser {
	if s.conns == nil || s.conns.limits.ReadTimeout <= 0 || r.Body == nil || r.Body == http.NoBody {
		return r.Body
	}
	return &stallReader{ReadCloser: r.Body, rc: http.NewResponseController(w), stall: s.conns.limits.ReadTimeout}
}

// bodyProbe notes whether a handler read the request's body.
type bodyProbe struct {
	io.ReadCloser
	read bool
}

func (b *bodyProbe) Read(p []byte) (int, error) {
	b.read = true
	return b.ReadCloser.Read(p)
}

// refuseGrace is how long a refused request's unread body is still
// drained after the answer is sent, before its connection closes: enough
// for the caller to read the answer before a reset can reach it.
const refuseGrace = 500 * time.Millisecond

// Bounds on what drainOversized reads of a body too large to take.
const (
	oversizedDrain     = 8 << 20
	oversizedDrainTime = 2 * time.Second
)

// drainOversized reads and drops (into io.Discard: nothing is kept) up
// to oversizedDrain bytes of an authenticated caller's body that is too
// large to take, for at most oversizedDrainTime, before its 413 is
// written. A client that sends its whole body before it reads (most do,
// unless they ask "Expect: 100-continue") then gets the 413 rather than
// a reset of its connection mid-write. The refusal was decided from the
// Content-Length alone; a caller who asked to continue sends nothing, and
// nothing is read.
func drainOversized(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") || r.ProtoMajor != 1 {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(oversizedDrainTime)) != nil {
		return
	}
	io.CopyN(io.Discard, r.Body, oversizedDrain)
}

// refuseUnread prepares the error answer of a request whose body the
// handler never read (a refusal before it, such as a missing token): the
// answer says the connection closes, so the server does not wait for the
// body before answering, and the returned function, called once the
// answer is written, ends the reading refuseGrace later, so it does not
// wait for the body after answering either.
func refuseUnread(w http.ResponseWriter, r *http.Request, probe *bodyProbe) func() {
	if r.ContentLength == 0 || probe.read || r.ProtoMajor != 1 {
		return func() {}
	}
	w.Header().Set("Connection", "close")
	return func() { http.NewResponseController(w).SetReadDeadline(time.Now().Add(refuseGrace)) }
}
