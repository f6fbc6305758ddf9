package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/store"
)

// A follower is a server that shares the database with the leader but
// does not hold the leader lease (fail-over, docs/operations.md). It
// holds no state of its own: it answers /healthz, serves the job reads
// that the database answers alone (GET /jobs, GET /jobs/{id}), and sends
// every other request to the leader with a 307 (the same method, body,
// path and query), or answers 503 with Retry-After while no server leads.

// FollowerStore is what a follower reads: *store.Store.
type FollowerStore interface {
	Leader(ctx context.Context, now time.Time) (store.LeaderInfo, error)
	JobsPage(ctx context.Context, q store.JobQuery) ([]api.Job, bool, error)
	Job(ctx context.Context, id string) (api.Job, error)
	JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
	NumberID(ctx context.Context, n int64) (string, bool, error) // a job's or array's number (store/numbers.go)
}

// FollowerConfig configures NewFollower.
type FollowerConfig struct {
	Store FollowerStore
	// Auth checks the callers of the reads; nil: the reads are sent to
	// the leader too.
	Auth *auth.Service
	// Self is this server's own advertised base URL, reported by /healthz.
	Self   string
	Now    func() time.Time
	Logger *slog.Logger
}

// Follower is the API of a server that does not lead. Create it with
// NewFollower.
type Follower struct {
	cfg FollowerConfig
	mux *http.ServeMux

	mu       sync.Mutex
	leader   store.LeaderInfo
	readAt   time.Time // when leader was read
	readErr  error
	reloadAt time.Time // when Auth last reloaded the tokens
}

// leaderCache is how long a follower trusts its last read of the lease
// row: redirects name a leader at most this stale.
const leaderCache = 500 * time.Millisecond

// NewFollower returns the follower API.
func NewFollower(cfg FollowerConfig) *Follower {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Follower{cfg: cfg, mux: http.NewServeMux()}
	f.mux.HandleFunc("GET /healthz", f.healthz)
	if cfg.Auth != nil {
		f.mux.HandleFunc("GET /jobs", f.read(f.jobs))
		f.mux.HandleFunc("GET /jobs/{job_id}", f.read(f.job))
	}
	f.mux.HandleFunc("/", f.redirect)
	return f
}

func (f *Follower) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Health is the follower's /healthz answer.
type Health struct {
	Status string `json:"status"`
	Role   string `json:"role"`
	Leader string `json:"leader,omitempty"`
	Self   string `json:"self,omitempty"`
}

func (f *Follower) healthz(w http.ResponseWriter, r *http.Request) {
	l, _ := f.leaderInfo(r.Context())
	writeJSON(w, http.StatusOK, Health{Status: "ok", Role: "follower", Leader: l.Address, Self: f.cfg.Self})
}

// leaderInfo reads the lease row, at most every leaderCache.
func (f *Follower) leaderInfo(ctx context.Context) (store.LeaderInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Now()
	if f.readAt.IsZero() || now.Sub(f.readAt) >= leaderCache || now.Before(f.readAt) {
		f.leader, f.readErr = f.cfg.Store.Leader(ctx, now)
		f.readAt = now
	}
	return f.leader, f.readErr
}

// redirect sends the request to the leader: 307 to the same path and
// query there, or 503 while no server leads (or the leader recorded no
// address).
func (f *Follower) redirect(w http.ResponseWriter, r *http.Request) {
	// The body is the leader's to read: answer without waiting for it.
	endRead := refuseUnread(w, r, &bodyProbe{})
	defer endRead()
	l, err := f.leaderInfo(r.Context())
	if err != nil {
		f.cfg.Logger.Warn("follower: read the leader lease", "err", err)
	}
	if l.Address == "" || l.Address == f.cfg.Self {
		w.Header().Set("Retry-After", "1")
		writeError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: "no_leader",
			Message: "this server is a follower and no server leads right now (a fail-over is under way); retry in a moment"})
		return
	}
	to := strings.TrimSuffix(l.Address, "/") + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		to += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", to)
	writeError(w, &api.Error{Status: http.StatusTemporaryRedirect, Code: "not_leader",
		Message: "this server is a follower; the leader is " + l.Address})
}

// read wraps a read the follower serves itself: the caller's token must
// be a viewer's or more, as on the leader. The follower reloads the
// tokens from the database at most once a second, so a token made or
// revoked on the leader counts here within a second.
func (f *Follower) read(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := f.authenticate(r)
		if err == nil && !p.Role.AtLeast(api.RoleViewer) {
			err = api.Forbidden("forbidden", "this call needs the viewer role")
		}
		if err == nil {
			r = r.WithContext(context.WithValue(r.Context(), callKey{}, &callInfo{who: p}))
			err = h(w, r)
		}
		if err != nil {
			var e *api.Error
			if !errors.As(err, &e) {
				f.cfg.Logger.Error("follower read", "path", r.URL.Path, "err", err)
				e = &api.Error{Status: http.StatusInternalServerError, Message: "internal error"}
			}
			writeError(w, e)
		}
	}
}

func (f *Follower) authenticate(r *http.Request) (auth.Principal, error) {
	f.mu.Lock()
	reload := f.cfg.Now().Sub(f.reloadAt) >= time.Second
	if reload {
		f.reloadAt = f.cfg.Now()
	}
	f.mu.Unlock()
	if reload {
		if err := f.cfg.Auth.Reload(r.Context()); err != nil {
			return auth.Principal{}, err
		}
	}
	return (&Server{auth: f.cfg.Auth}).authenticate(r)
}

// jobs is GET /jobs from the database: the same filters, pages and
// cursors as the leader's, with each job as its last committed row.
func (f *Follower) jobs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	jq := store.JobQuery{User: q.Get("user"), Project: q.Get("project"), Name: q.Get("name")}
	var err error
	if jq.User, err = ownerFilter(r); err != nil { // mine.go: mine=true
		return err
	}
	if st := api.State(q.Get("state")); st != "" {
		if !st.Valid() {
			return api.Invalid("state", "%q is not a job state; use one of %v", st, api.States)
		}
		jq.States = []api.State{st}
	}
	if jq.Since, jq.Limit, err = sinceLimit(q); err != nil {
		return err
	}
	if jq.Until, jq.Before, err = untilCursor(q); err != nil {
		return err
	}
	if jq.Limit <= 0 {
		jq.Limit = 1000
	}
	jq.MaxBytes = orchestrator.PageBytes // a page stops at about 8 MiB, as the leader's
	jobs, cut, err := f.cfg.Store.JobsPage(r.Context(), jq)
	if err != nil {
		return err
	}
	who := principal(r)
	next := ""
	for i := range jobs {
		hideEnv(who, &jobs[i])
		jobs[i].Events = nil
	}
	if len(jobs) > 0 && (len(jobs) == jq.Limit || cut) {
		next = jobs[len(jobs)-1].ID
	}
	return writeJobList(w, api.JobList{Jobs: jobs, NextCursor: next}) // jobpages.go
}

// job is GET /jobs/{job_id} from the database; a unique prefix of at
// least 6 characters works, as on the leader, and a number (1234, or a
// task 1234_7).
func (f *Follower) job(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("job_id")
	if nid, err := f.numberID(r, id); err != nil || nid != "" {
		if err != nil {
			return err
		}
		id = nid
	}
	j, err := f.cfg.Store.Job(r.Context(), id)
	if errors.Is(err, store.ErrNoJob) && len(id) >= 6 {
		ids, perr := f.cfg.Store.JobIDsWithPrefix(r.Context(), id, 2)
		if perr != nil {
			return perr
		}
		switch len(ids) {
		case 1:
			j, err = f.cfg.Store.Job(r.Context(), ids[0])
		case 2:
			return api.Invalid("job_id", "%q is the start of more than one job id; give more of it", id)
		}
	}
	if errors.Is(err, store.ErrNoJob) {
		return api.NotFound("no job %q", id)
	}
	if err != nil {
		return err
	}
	hideEnv(principal(r), &j)
	return writeJSON(w, http.StatusOK, j)
}

// numberID is the id that ref names when it is a number (1234) or a
// task's (1234_7), read from the database; "" when ref is neither.
func (f *Follower) numberID(r *http.Request, ref string) (string, error) {
	num, task, hasTask := strings.Cut(ref, "_")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || num[0] == '+' || (hasTask && (task == "" || strings.Trim(task, "0123456789") != "")) {
		return "", nil
	}
	id, found, err := f.cfg.Store.NumberID(r.Context(), n)
	if err != nil {
		return "", err
	}
	if !found {
		return "", api.NotFound("no job number %d", n)
	}
	if hasTask {
		id += "_" + task
	}
	return id, nil
}
