package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/corral-sched/corral/internal/api"
)

// Submit queues a job (POST /queue/submit). A non-empty idempotencyKey is
// sent as the Idempotency-Key header: submitting again with the same key
// returns the first job instead of queuing a second one.
//
// A string of req that is not valid UTF-8 is refused here, naming its
// field, before anything is sent: JSON would carry it rewritten (each bad
// byte as U+FFFD), so the server could not refuse it as it refuses such
// a body.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest, idempotencyKey string) (api.Job, error) {
	if field := invalidUTF8(req); field != "" {
		return api.Job{}, api.Invalid(field, "is not valid UTF-8; the command and every other field must be UTF-8 text")
	}
	r := request{method: http.MethodPost, path: "/queue/submit", body: req}
	if idempotencyKey != "" {
		r.header = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var job api.Job
	err := c.call(ctx, r, &job)
	return job, err
}

// Queue returns the queued jobs in order, with queue statistics (GET /queue).
func (c *Client) Queue(ctx context.Context) (api.QueueResponse, error) {
	return c.QueueAll(ctx) // pages.go
}

// QueueStats returns the queue statistics (GET /queue/statistics).
func (c *Client) QueueStats(ctx context.Context) (api.QueueStatistics, error) {
	var s api.QueueStatistics
	err := c.call(ctx, request{method: http.MethodGet, path: "/queue/statistics"}, &s)
	return s, err
}

// Cancel cancels a job (DELETE /queue/{id}). A queued job comes back
// canceled; a running one comes back still running with CancelRequested set:
// it gets SIGTERM, then SIGKILL after grace (zero: the server's default).
func (c *Client) Cancel(ctx context.Context, id string, grace time.Duration) (api.Job, error) {
	p, err := pathID("job", id)
	if err != nil {
		return api.Job{}, err
	}
	r := request{method: http.MethodDelete, path: "/queue/" + p}
	if grace > 0 {
		r.query = url.Values{"grace": {grace.String()}}
	}
	var job api.Job
	err = c.call(ctx, r, &job)
	return job, err
}

// SetPriority changes a queued job's priority (PATCH /queue/{id}/priority).
// priority is a name (low, normal, high, critical) or a number 1-4; the
// server checks it.
func (c *Client) SetPriority(ctx context.Context, id, priority string) (api.Job, error) {
	p, err := pathID("job", id)
	if err != nil {
		return api.Job{}, err
	}
	body := api.PriorityRequest{Priority: jsonString(priority)}
	var job api.Job
	err = c.call(ctx, request{method: http.MethodPatch, path: "/queue/" + p + "/priority", body: body}, &job)
	return job, err
}

// JobFilter narrows Jobs. Zero fields do not filter.
type JobFilter struct {
	State   api.State
	User    string
	Project string
	Name    string    // the job's name, exactly
	Since   time.Time // jobs submitted at or after
	Until   time.Time // jobs submitted before
	Cursor  string    // the page after this cursor (the last page's NextCursor)
	Limit   int
	// Mine is "true" for the caller's own jobs (the server knows whose
	// token it is), "auto" for a user's own and everyone's for admins and
	// viewers (corral jobs' default); "" does not filter.
	Mine string
}

func (f JobFilter) values() url.Values {
	v := url.Values{}
	if f.State != "" {
		v.Set("state", string(f.State))
	}
	if f.User != "" {
		v.Set("user", f.User)
	}
	if f.Project != "" {
		v.Set("project", f.Project)
	}
	if f.Name != "" {
		v.Set("name", f.Name)
	}
	if !f.Since.IsZero() {
		v.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if !f.Until.IsZero() {
		v.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	if f.Cursor != "" {
		v.Set("cursor", f.Cursor)
	}
	if f.Mine != "" {
		v.Set("mine", f.Mine)
	}
	return v
}

// Jobs lists jobs, newest first (GET /jobs).
func (c *Client) Jobs(ctx context.Context, f JobFilter) (api.JobList, error) {
	var l api.JobList
	err := c.call(ctx, request{method: http.MethodGet, path: "/jobs", query: f.values()}, &l)
	return l, err
}

// Job returns one job with its events (GET /jobs/{id}).
func (c *Client) Job(ctx context.Context, id string) (api.Job, error) {
	p, err := pathID("job", id)
	if err != nil {
		return api.Job{}, err
	}
	var job api.Job
	err = c.call(ctx, request{method: http.MethodGet, path: "/jobs/" + p}, &job)
	return job, err
}

// WhatIf asks when a queued job would start with gpus GPUs per node
// (GET /jobs/{id}/what-if); nothing is submitted or changed.
func (c *Client) WhatIf(ctx context.Context, id string, gpus int) (api.WhatIf, error) {
	p, err := pathID("job", id)
	if err != nil {
		return api.WhatIf{}, err
	}
	var w api.WhatIf
	err = c.call(ctx, request{method: http.MethodGet, path: "/jobs/" + p + "/what-if", query: url.Values{"gpus": {strconv.Itoa(gpus)}}}, &w)
	return w, err
}

// LogsOptions chooses what LogsWith reads.
type LogsOptions struct {
	Follow  bool // keep streaming until the job ends
	Attempt *int // which run of a retried job, counted from 0 like the API and $CORRAL_ATTEMPT; nil: the latest
	Rank    int  // which node of a multi-node gang (0 is the first)
	// Offset, when following, is the byte of the attempt's log to start
	// at. FollowLogs starts at byte Offset of attempt From (when set; it
	// then goes on to later attempts as without it), so that a follow
	// picks up where a read of the log's tail (LogTail) ended.
	Offset int64
	From   *int
}

// Logs copies a job's output to w (GET /jobs/{id}/logs); with follow it
// keeps streaming until the job ends or ctx is done.
func (c *Client) Logs(ctx context.Context, id string, follow bool, w io.Writer) error {
	return c.LogsWith(ctx, id, LogsOptions{Follow: follow}, w)
}

// LogsWith is Logs with every option.
func (c *Client) LogsWith(ctx context.Context, id string, o LogsOptions, w io.Writer) error {
	p, err := pathID("job", id)
	if err != nil {
		return err
	}
	resp, cancel, err := c.send(ctx, logsRequest(p, o))
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if _, err := io.Copy(flushWriter{w}, resp.Body); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("logs of job %s: %w", id, ctx.Err())
		}
		return fmt.Errorf("logs of job %s: the stream broke off: %w", id, err)
	}
	// The server ends a followed log early when the token stops working,
	// and says so in a trailer.
	return streamEnd(id, resp.Trailer.Get("X-Corral-Stream-End"))
}

// logsRequest is GET /jobs/{p}/logs with o's follow, attempt and rank.
func logsRequest(p string, o LogsOptions) request {
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "true")
	}
	if o.Attempt != nil {
		q.Set("attempt", strconv.Itoa(*o.Attempt))
	}
	if o.Rank > 0 {
		q.Set("rank", strconv.Itoa(o.Rank))
	}
	if o.Follow && o.Offset > 0 {
		q.Set("offset", strconv.FormatInt(o.Offset, 10))
	}
	return request{method: http.MethodGet, path: "/jobs/" + p + "/logs", query: q, stream: true,
		header: http.Header{"Accept": {"text/plain"}}}
}

// flushWriter flushes w after each write when w buffers (a bufio.Writer, an
// http.ResponseWriter), so that followed logs show up as they come.
type flushWriter struct{ w io.Writer }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	switch fl := f.w.(type) {
	case interface{ Flush() error }:
		if ferr := fl.Flush(); err == nil {
			err = ferr
		}
	case http.Flusher:
		fl.Flush()
	}
	return n, err
}

// Cluster returns the nodes and their GPUs (GET /cluster/gpu-status).
func (c *Client) Cluster(ctx context.Context) (api.ClusterStatus, error) {
	var s api.ClusterStatus
	err := c.call(ctx, request{method: http.MethodGet, path: "/cluster/gpu-status"}, &s)
	return s, err
}

// NodeAction cordons, drains or uncordons a node
// (POST /cluster/nodes/{node_id}/{action}).
func (c *Client) NodeAction(ctx context.Context, nodeID, action string) (api.NodeAction, error) {
	var a api.NodeAction
	err := c.call(ctx, request{method: http.MethodPost, path: "/cluster/nodes/" + url.PathEscape(nodeID) + "/" + url.PathEscape(action)}, &a)
	return a, err
}

// Allocate holds GPUs for work run outside Corral (POST /cluster/gpu-allocate).
func (c *Client) Allocate(ctx context.Context, req api.AllocateRequest) (api.Hold, error) {
	var h api.Hold
	err := c.call(ctx, request{method: http.MethodPost, path: "/cluster/gpu-allocate", body: req}, &h)
	return h, err
}

// Release gives back the GPUs of a hold (POST /cluster/gpu-release).
func (c *Client) Release(ctx context.Context, req api.ReleaseRequest) (api.Hold, error) {
	var h api.Hold
	err := c.call(ctx, request{method: http.MethodPost, path: "/cluster/gpu-release", body: req}, &h)
	return h, err
}

// OrchestratorStatus returns the scheduling loop's state (GET /orchestrator/status).
func (c *Client) OrchestratorStatus(ctx context.Context) (api.OrchestratorStatus, error) {
	return c.orchestrator(ctx, http.MethodGet, "/orchestrator/status")
}

// StartOrchestrator starts the scheduling loop (POST /orchestrator/start).
func (c *Client) StartOrchestrator(ctx context.Context) (api.OrchestratorStatus, error) {
	return c.orchestrator(ctx, http.MethodPost, "/orchestrator/start")
}

// StopOrchestrator stops the scheduling loop: nothing new starts, nothing
// running is touched (POST /orchestrator/stop).
func (c *Client) StopOrchestrator(ctx context.Context) (api.OrchestratorStatus, error) {
	return c.orchestrator(ctx, http.MethodPost, "/orchestrator/stop")
}

func (c *Client) orchestrator(ctx context.Context, method, path string) (api.OrchestratorStatus, error) {
	var s api.OrchestratorStatus
	err := c.call(ctx, request{method: method, path: path}, &s)
	return s, err
}

// Policies returns the active scheduling policy and its switches
// (GET /orchestrator/policies).
func (c *Client) Policies(ctx context.Context) (api.Policies, error) {
	var p api.Policies
	err := c.call(ctx, request{method: http.MethodGet, path: "/orchestrator/policies"}, &p)
	return p, err
}

// SetPolicies changes the fields set in u and returns the policies now in
// force (PUT /orchestrator/policies).
func (c *Client) SetPolicies(ctx context.Context, u api.PoliciesUpdate) (api.Policies, error) {
	var p api.Policies
	err := c.call(ctx, request{method: http.MethodPut, path: "/orchestrator/policies", body: u}, &p)
	return p, err
}

// jsonString encodes s as a raw JSON string.
func jsonString(s string) api.RawValue {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// invalidUTF8 names the first field of req that is not valid UTF-8, or "".
func invalidUTF8(req api.SubmitRequest) string {
	for _, f := range []struct{ field, v string }{{"name", req.Name}, {"user", req.User}, {"project", req.Project},
		{"command", req.Command}, {"workdir", req.Workdir}, {"gpu_type", req.GPUType}} {
		if !utf8.ValidString(f.v) {
			return f.field
		}
	}
	for _, f := range []struct {
		field string
		m     map[string]string
	}{{"env", req.Env}, {"node_labels", req.NodeLabels}} {
		for k, v := range f.m {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return f.field
			}
		}
	}
	return ""
}
