package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/shellproto"
	"github.com/corral-sched/corral/internal/tunnel"
)

// WithTunnel serves shells (GET /jobs/{job_id}/shell), port streams
// (DialJobPort) and the agents' tunnel route through h. Without it those
// answer 503.
func WithTunnel(h *tunnel.Hub) Option {
	return func(s *Server) { s.tunnels = h }
}

// rankFinder is an Agents that knows which node runs each rank
// (agents.Pool).
type rankFinder interface {
	RankNode(jobID string, rank int) (node string, attempt int, ok bool)
}

// Bounds of a shell request's command line.
const (
	maxShellArgs    = 256
	maxShellArgSize = 16 << 10
	maxShellCommand = 64 << 10 // in all: it travels in one tunnel message
)

// errNoTunnels answers the routes that need a tunnel on a server without.
var errNoTunnels = &api.Error{Status: http.StatusServiceUnavailable, Code: "no_tunnel", Message: "this server opens no shells or port streams"}

// where returns the node and attempt of the job's rank; the job must run.
func (s *Server) where(jobID string, rank int) (node string, attempt int, err error) {
	job, err := s.o.Job(jobID)
	if err != nil {
		return "", 0, err
	}
	if job.State != api.StateRunning {
		return "", 0, api.Conflict("not_running", "job %s is %s: a shell or port stream needs a running job", jobID, job.State)
	}
	rf, ok := s.agents.(rankFinder)
	if !ok {
		return "", 0, errNoTunnels
	}
	node, attempt, ok = rf.RankNode(jobID, rank)
	if !ok {
		return "", 0, api.Invalid("rank", "job %s runs no rank %d (ranks are 0 to %d)", jobID, rank, max(job.Nodes, 1)-1)
	}
	return node, attempt, nil
}

// openOnNode opens req on node and maps the tunnel's failures to answers.
func (s *Server) openOnNode(ctx context.Context, node string, req shellproto.Request) (net.Conn, error) {
	c, err := s.tunnels.Open(ctx, node, req)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, tunnel.ErrNoTask):
		return nil, api.Conflict("not_running", "job %s does not run on node %s now", req.JobID, node)
	case errors.Is(err, tunnel.ErrNoTunnel):
		return nil, &api.Error{Status: http.StatusServiceUnavailable, Code: "node_unreachable",
			Message: fmt.Sprintf("node %s has no tunnel to this server (its agent is not connected, or too old)", node)}
	}
	return nil, &api.Error{Status: http.StatusBadGateway, Code: "node_stream_failed", Message: err.Error()}
}

// DialJobPort implements NodeDialer: a TCP stream to 127.0.0.1:port on
// the node of the job's rank 0. The job must be running.
func (s *Server) DialJobPort(ctx context.Context, jobID string, port int) (net.Conn, error) {
	if s.tunnels == nil {
		return nil, errNoTunnels
	}
	if port < 1 || port > 65535 {
		return nil, api.Invalid("port", "must be 1 to 65535")
	}
	node, attempt, err := s.where(jobID, 0)
	if err != nil {
		return nil, err
	}
	return s.openOnNode(ctx, node, shellproto.Request{Kind: shellproto.KindPort, JobID: jobID, Attempt: attempt, Port: port})
}

// shellRequest reads a shell's query: rank, tty, rows, cols, term and
// cmd (repeated: the command's argv).
func shellRequest(r *http.Request) (shellproto.Request, error) {
	q := r.URL.Query()
	req := shellproto.Request{Kind: shellproto.KindShell, Command: q["cmd"], Term: q.Get("term")}
	if v := q.Get("rank"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return req, api.Invalid("rank", "must be a rank number, 0 or more")
		}
		req.Rank = n
	}
	if v := q.Get("tty"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return req, api.Invalid("tty", "must be true or false")
		}
		req.TTY = b
	}
	for name, dst := range map[string]*uint16{"rows": &req.Rows, "cols": &req.Cols} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return req, api.Invalid(name, "must be a number from 0 to 65535")
			}
			*dst = uint16(n)
		}
	}
	if len(req.Command) > maxShellArgs {
		return req, api.Invalid("cmd", "at most %d arguments", maxShellArgs)
	}
	total := 0
	for _, a := range req.Command {
		if len(a) > maxShellArgSize || strings.ContainsRune(a, 0) {
			return req, api.Invalid("cmd", "an argument is at most %d bytes, without NUL", maxShellArgSize)
		}
		total += len(a)
	}
	if total > maxShellCommand {
		return req, api.Invalid("cmd", "the command is at most %d bytes in all", maxShellCommand)
	}
	if len(req.Command) > 0 && req.Command[0] == "" {
		return req, api.Invalid("cmd", "the command must not be empty")
	}
	if len(req.Term) > 64 || strings.ContainsAny(req.Term, "\x00=") {
		return req, api.Invalid("term", "at most 64 characters, without '=' or NUL")
	}
	return req, nil
}

// shell is GET /jobs/{job_id}/shell: a WebSocket carrying shellproto
// frames to a shell in the job's rank, on its node. Only the job's owner,
// its project's admins and admins may attach; every attach is audited
// (job.shell) when it opens, and counts as an attachment of the job
// (idle reclaim) while it lasts.
func (s *Server) shell(w http.ResponseWriter, r *http.Request) error {
	id, err := s.jobID(r)
	if err != nil {
		return err
	}
	if err := s.mayActOnJob(r, id); err != nil {
		return err
	}
	req, err := shellRequest(r)
	if err != nil {
		return err
	}
	node, attempt, err := s.where(id, req.Rank)
	if err != nil {
		return err
	}
	if s.tunnels == nil {
		return errNoTunnels
	}
	req.JobID, req.Attempt = id, attempt
	ctx := context.WithoutCancel(r.Context())
	nodeConn, err := s.openOnNode(r.Context(), node, req)
	if err != nil {
		return err
	}
	c, err := websocket.Accept(w, r, nil) // refuses another site's page (Origin)
	if err != nil {
		nodeConn.Close()
		return nil // Accept has answered
	}
	c.SetReadLimit(tunnel.ReadLimit)
	if call, ok := r.Context().Value(callKey{}).(*callInfo); ok {
		s.record(r, route{action: call.action}, call, http.StatusSwitchingProtocols, "", call.requestID, call.start)
		audited(r)
	}
	done := s.attach.Open(id)
	defer done()
	s.log.Info("shell attached", "job_id", id, "rank", req.Rank, "node", node, "user", principal(r).User)
	splice(websocket.NetConn(ctx, c, websocket.MessageBinary), nodeConn)
	return nil
}

// agentTunnel is GET /agent/v1/tunnel: an agent's control channel (no
// session) or a stream's data channel (session=ID), for node_id, with the
// join token and the node's session as the other agent routes.
func (s *Server) agentTunnel(w http.ResponseWriter, r *http.Request) error {
	if err := s.agentAuth(r); err != nil {
		return err
	}
	q := r.URL.Query()
	node := q.Get("node_id")
	if err := s.sessions.check(node, r.Header.Get(api.AgentSessionHeader)); err != nil {
		return err
	}
	if s.tunnels == nil {
		return errNoTunnels
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil
	}
	if session := q.Get("session"); session != "" {
		if err := s.tunnels.ServeData(r.Context(), node, session, q.Get("failure"), c); err != nil {
			s.log.Warn("tunnel: a stream dialed back that nothing waits for", "node", clipID(node), "err", err)
		}
		return nil
	}
	s.tunnels.ServeControl(r.Context(), node, c)
	return nil
}

// splice relays a session between the client's conn and the node's
// until the node's side ends (its last frame is the exit code), then
// closes both. When the client goes first, the node's side is closed,
// which hangs its shell up.
func splice(client, node net.Conn) {
	up := make(chan struct{})
	go func() {
		defer close(up)
		io.Copy(node, client)
		node.Close()
	}()
	io.Copy(client, node)
	client.Close()
	node.Close()
	<-up
}
