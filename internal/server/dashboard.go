package server

import (
	"context"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/feature/history"
	"github.com/corral-sched/corral/web"
)

// How the event stream paces itself: an update at most every
// eventsMinGap after a change, and at least every eventsRefresh (GPU
// telemetry changes without a commit).
const (
	eventsMinGap  = 300 * time.Millisecond
	eventsRefresh = 5 * time.Second
)

// contentPolicy keeps every request of the dashboard on this server.
const contentPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'"

// dashboardRoutes serves the embedded dashboard: its page at / and its
// assets under /ui/. They are not API routes, so they are not in the route
// table (nor in /openapi.json).
func (s *Server) dashboardRoutes() {
	assets, err := fs.Sub(web.Static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(assets))
	// The page at / is the same with or without a sign-in link's
	// ?token=: opening a link sets no session (nor replaces one). The
	// page takes the token out of the address, shows whom it signs in
	// as, and signs in only when its user presses the button
	// (POST /auth/session, CSRF-checked).
	s.mux.Handle("GET /{$}", s.wrap(route{method: "GET", path: "/", handler: func(w http.ResponseWriter, r *http.Request) error {
		page, err := fs.ReadFile(assets, "index.html")
		if err != nil {
			return err
		}
		dashboardHeaders(w)
		if r.URL.Query().Has("token") {
			w.Header().Set("Cache-Control", "no-store")
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, err = w.Write(page)
		return err
	}}))
	s.mux.Handle("GET /ui/", s.wrap(route{method: "GET", path: "/ui/", handler: func(w http.ResponseWriter, r *http.Request) error {
		dashboardHeaders(w)
		files.ServeHTTP(w, r)
		return nil
	}}))
}

func dashboardHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// history is GET /history: the cluster over time for graphs.
func (s *Server) history(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	now := time.Now()
	hq := history.Query{Since: now.Add(-time.Hour), Node: q.Get("node")}
	if v := q.Get("since"); v != "" {
		t, err := parseSince(v, now)
		if err != nil {
			return api.Invalid("since", "%s", err.Error())
		}
		hq.Since = t
	}
	if v := q.Get("points"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5000 {
			return api.Invalid("points", "must be an integer between 1 and 5000")
		}
		hq.Points = n
	}
	if hq.Node != "" && hq.Node != "all" {
		if _, err := s.o.History(hq.Node, now); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, s.feat.History.History(hq))
}

// dashboardFor is the dashboard's update as who may see it: the env
// values of jobs who may not act on are hidden (hideEnv), as in GET /jobs.
func (s *Server) dashboardFor(ctx context.Context, who auth.Principal) api.DashboardUpdate {
	u := s.o.Dashboard(ctx)
	for i := range u.Active {
		hideEnv(who, &u.Active[i])
	}
	return u
}

// events is GET /events: server-sent events for the dashboard. The first
// event, at once, is an `update` carrying the whole api.DashboardUpdate;
// each one after it is a `delta` carrying an api.DashboardDelta against
// what the stream sent before (events_delta.go). They come after every
// change (at most every eventsMinGap) and at least every eventsRefresh.
// The stream ends when the client goes, the server stops,
// or the caller's token is revoked or expires: then at once, with an
// `ended` event whose data is {"reason": "token_revoked"|"token_expired"}.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return &api.Error{Status: http.StatusInternalServerError, Code: "internal", Message: "this connection cannot stream"}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte("retry: 2000\n\n")); err != nil {
		return nil
	}
	ctx, stop := s.streamContext(r)
	defer stop()
	who := principal(r)
	refresh := time.NewTicker(eventsRefresh)
	defer refresh.Stop()
	view := newStreamView() // events_delta.go
	var sent time.Time
	for {
		if ctx.Err() != nil {
			return endEvents(ctx, w, flusher)
		}
		changed := s.o.Changed()
		event, data, err := nextEvent(view, s.dashboardFor(ctx, who), sent.IsZero())
		if err != nil {
			return err
		}
		if _, err := w.Write(append(append([]byte("event: "+event+"\ndata: "), data...), "\n\n"...)); err != nil {
			return nil // the client went away
		}
		flusher.Flush()
		sent = time.Now()
		select {
		case <-ctx.Done():
			return endEvents(ctx, w, flusher)
		case <-refresh.C:
			continue
		case <-changed:
		}
		// Let a burst of commits settle into one update.
		if wait := eventsMinGap - time.Since(sent); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return endEvents(ctx, w, flusher)
			case <-t.C:
			}
		}
	}
}

// endEvents ends an event stream whose context is done: when the
// caller's token stopped working it says so in an `ended` event first.
func endEvents(ctx context.Context, w http.ResponseWriter, flusher http.Flusher) error {
	if reason, ok := credentialEnded(ctx); ok {
		w.Write([]byte("event: ended\ndata: {\"reason\":\"" + reason + "\"}\n\n"))
		flusher.Flush()
	}
	return nil
}
