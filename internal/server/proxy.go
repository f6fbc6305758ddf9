package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// WithNodeDialer reaches notebooks on nodes other than the server's own
// (WithLocalNode) through d (nodedialer.go). Without it, a server with
// the agents' tunnel (WithTunnel) reaches them through that; one with
// neither answers 502 for them.
func WithNodeDialer(d NodeDialer) Option {
	return func(s *Server) { s.notebookProxy().remote = d }
}

// WithLocalNode names the node that runs on the server's own machine
// (corral up's in-process agent): the proxy dials its jobs' notebooks on
// 127.0.0.1 directly.
func WithLocalNode(nodeID string) Option {
	return func(s *Server) { s.notebookProxy().local = nodeID }
}

// WithProxyPublicURL names the server's address as people reach it
// (corral server --public-url): the proxy's answers then carry the
// notebook's address under it (api.NotebookURLHeader), which corral
// notebook prints. Empty: no such header.
func WithProxyPublicURL(publicURL string) Option {
	return func(s *Server) { s.notebookProxy().public = strings.TrimRight(publicURL, "/") }
}

// proxyAuditMax bounds the memory of first accesses already audited; past
// it the memory starts afresh (an access may then be audited again).
const proxyAuditMax = 10000

// notebooks is the state of the notebook proxy.
type notebooks struct {
	local     string     // the server's own node; "": none
	public    string     // --public-url, without its trailing slash; "": none
	remote    NodeDialer // nil: remote notebooks answer 502
	transport *http.Transport
	buffers   copyBuffers
	mu        sync.Mutex
	audited   map[string]bool // token id/job/attempt whose first access is in the audit trail
}

func (s *Server) notebookProxy() *notebooks {
	if s.nb == nil {
		s.nb = &notebooks{audited: map[string]bool{}}
	}
	return s.nb
}

// proxyHost is the transport's address of a job's notebook: it keys the
// connection pool by job and port, and DialContext reads both back.
func proxyHost(jobID string, port int) string {
	return "job-" + jobID + ":" + strconv.Itoa(port)
}

// notebookRoutes serves /proxy/{job_id}/...: every method, HTTP and
// WebSocket, to the notebook server of the job, for its owner only. It is
// not an API route (it forwards what the notebook serves), so it is not
// in the route table nor in /openapi.json.
func (s *Server) notebookRoutes() {
	nb := s.notebookProxy()
	nb.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, portText, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, err := strconv.Atoi(portText)
			if err != nil {
				return nil, fmt.Errorf("notebook port %q: %w", portText, err)
			}
			return s.dialNotebook(ctx, strings.TrimPrefix(host, "job-"), port)
		},
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	h := s.wrap(route{method: "ANY", path: "/proxy/{job_id}/", handler: s.proxy, access: public})
	// The API's 1 MiB body limit (wrap) is not the notebook's: uploads
	// go through whole, so the original body travels in the context.
	s.mux.Handle("/proxy/{job_id}/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxyBodyKey{}, r.Body)))
	}))
}

type proxyBodyKey struct{}

// errRemoteNotebook: the job runs on a node the server cannot reach yet.
var errRemoteNotebook = errors.New("the notebook runs on another node, and this server has no tunnel to its agent")

// dialNotebook connects to the loopback port of the node that runs the
// job: directly when it is the server's own node, else through the
// NodeDialer.
func (s *Server) dialNotebook(ctx context.Context, jobID string, port int) (net.Conn, error) {
	job, err := s.o.Job(jobID)
	if err != nil {
		return nil, err
	}
	if len(job.Allocation) == 0 {
		return nil, fmt.Errorf("job %s holds no node now", jobID)
	}
	nb := s.notebookProxy()
	if node := job.Allocation[0].NodeID; node != nb.local {
		if nb.remote == nil {
			return nil, fmt.Errorf("node %s: %w", node, errRemoteNotebook)
		}
		return nb.remote.DialJobPort(ctx, jobID, port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// proxy forwards a request to the job's notebook server, path unchanged
// (the notebook serves under /proxy/JOB/, Jupyter through its base_url).
// Only the job's owner passes, by token or dashboard session; the Corral
// session cookie and Authorization header stay here, and the notebook's
// own secret (api.NotebookTokenVar) goes instead. The request counts as
// attached to the job while it lasts (a WebSocket: while it is open).
func (s *Server) proxy(w http.ResponseWriter, r *http.Request) error {
	if body, ok := r.Context().Value(proxyBodyKey{}).(io.ReadCloser); ok {
		r.Body = body
	}
	p, err := s.authenticate(r)
	if err != nil {
		return err
	}
	s.authenticated(r)
	// An upload to the notebook is bounded by its stalls, not its length.
	r.Body = s.streamBody(w, r)
	call, _ := r.Context().Value(callKey{}).(*callInfo)
	if call != nil {
		call.who = p
	}
	given := r.PathValue("job_id")
	id, err := s.jobID(r)
	if err != nil {
		return err
	}
	job, err := s.o.Job(id)
	if err != nil {
		return err
	}
	if p.User != job.User {
		return api.Forbidden("forbidden", fmt.Sprintf("only the owner of job %s (%s) may open its notebook", id, job.User))
	}
	if id != given { // a prefix of the id: to the notebook's own path
		rest := strings.TrimPrefix(r.URL.Path, "/proxy/"+given)
		u := url.URL{Path: "/proxy/" + id + rest, RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, u.String(), http.StatusTemporaryRedirect)
		return nil
	}
	if !job.Notebook {
		return api.NotFound("job %s runs no notebook (corral notebook starts one)", id)
	}
	if job.State != api.StateRunning || len(job.Allocation) == 0 {
		return &api.Error{Status: http.StatusConflict, Code: "not_running",
			Message: fmt.Sprintf("job %s is %s; its notebook is reachable while it runs", id, job.State)}
	}
	if p.Session && (mutating(r.Method) || isUpgrade(r)) {
		if err := sameOrigin(r); err != nil {
			return err
		}
	}
	done := s.attach.Open(id)
	defer done()
	s.auditNotebook(r, p.TokenID, job, call)
	port := api.NotebookPort(id, job.RetryCount)
	secret := api.NotebookSecret(job.Env[api.NotebookTokenVar], job.RetryCount)
	rp := &httputil.ReverseProxy{
		Transport:  s.notebookProxy().transport,
		BufferPool: &s.notebookProxy().buffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", proxyHost(id, port)
			pr.Out.Host = pr.In.Host // the browser's host: Jupyter compares it with a WebSocket's Origin
			pr.SetXForwarded()
			pr.Out.Header.Del("Authorization")
			stripCookie(pr.Out.Header, sessionCookie)
			pr.Out.Header.Set("Authorization", "token "+secret)
		},
		ModifyResponse: func(resp *http.Response) error {
			dropSetCookie(resp.Header, sessionCookie)
			resp.Header.Set(api.NotebookProxiedHeader, "1")
			if pub := s.notebookProxy().public; pub != "" {
				resp.Header.Set(api.NotebookURLHeader, pub+api.NotebookPath(id))
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			msg := fmt.Sprintf("the notebook of job %s does not answer on its port %d: %v", id, port, err)
			if errors.Is(err, errRemoteNotebook) {
				msg = fmt.Sprintf("the notebook of job %s: %v", id, err)
			}
			writeError(w, &api.Error{Status: http.StatusBadGateway, Code: "notebook_unreachable", Message: msg})
		},
	}
	rp.ServeHTTP(w, r)
	return nil
}

// copyBuffers lends the proxy its 32 KiB copy buffers
// (httputil.BufferPool), instead of one new buffer per request.
type copyBuffers struct{ pool sync.Pool }

func (p *copyBuffers) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (p *copyBuffers) Put(b []byte) { p.pool.Put(&b) }

// isUpgrade reports whether r asks for a protocol upgrade (a WebSocket).
func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// sameOrigin refuses a cookie-authenticated change or WebSocket that
// another site's page started (the session cookie is SameSite=Strict as
// well; a notebook's own scripts cannot add the API's CSRF header).
func sameOrigin(r *http.Request) error {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return api.Forbidden("csrf", "the request comes from another site")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return api.Forbidden("csrf", "the request comes from another origin")
		}
	}
	return nil
}

// stripCookie removes the cookie name from a request's Cookie headers.
func stripCookie(h http.Header, name string) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		for part := range strings.SplitSeq(line, ";") {
			if k, _, _ := strings.Cut(strings.TrimSpace(part), "="); k != name && strings.TrimSpace(part) != "" {
				keep = append(keep, strings.TrimSpace(part))
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// dropSetCookie removes a response's Set-Cookie of name: a notebook may
// not replace the Corral session.
func dropSetCookie(h http.Header, name string) {
	var keep []string
	for _, v := range h.Values("Set-Cookie") {
		if k, _, _ := strings.Cut(v, "="); strings.TrimSpace(k) != name {
			keep = append(keep, v)
		}
	}
	h.Del("Set-Cookie")
	for _, v := range keep {
		h.Add("Set-Cookie", v)
	}
}

// auditNotebook records a token's first access to an attempt's notebook
// (action notebook.open); later requests of the same token are not.
func (s *Server) auditNotebook(r *http.Request, tokenID string, job api.Job, call *callInfo) {
	if s.auth == nil || call == nil {
		return
	}
	nb := s.notebookProxy()
	key := tokenID + "/" + job.ID + "/" + strconv.Itoa(job.RetryCount)
	nb.mu.Lock()
	seen := nb.audited[key]
	if !seen {
		if len(nb.audited) >= proxyAuditMax {
			clear(nb.audited)
		}
		nb.audited[key] = true
	}
	nb.mu.Unlock()
	if !seen {
		s.record(r, route{action: "notebook.open"}, call, http.StatusOK, "", call.requestID, call.start)
	}
}
