package ray

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The Ray Jobs API's wire types, as ray-project/ray defines them in
// dashboard/modules/job (common.py JobSubmitRequest, pydantic_models.py
// JobDetails) and the state API's node schema (util/state/common.py
// NodeState). Only the fields Corral reads or writes are here.

// Job statuses (common.py JobStatus). STOPPED, SUCCEEDED and FAILED are
// terminal.
const (
	StatusPending   = "PENDING"
	StatusRunning   = "RUNNING"
	StatusStopped   = "STOPPED"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
)

// SubmitRequest is the body of POST /api/jobs/.
type SubmitRequest struct {
	Entrypoint          string             `json:"entrypoint"`
	SubmissionID        string             `json:"submission_id,omitempty"`
	RuntimeEnv          *RuntimeEnv        `json:"runtime_env,omitempty"`
	Metadata            map[string]string  `json:"metadata,omitempty"`
	EntrypointNumCPUs   *float64           `json:"entrypoint_num_cpus,omitempty"`
	EntrypointNumGPUs   *float64           `json:"entrypoint_num_gpus,omitempty"`
	EntrypointMemory    *int64             `json:"entrypoint_memory,omitempty"` // bytes
	EntrypointResources map[string]float64 `json:"entrypoint_resources,omitempty"`
}

// RuntimeEnv is the part of Ray's runtime_env Corral sets.
type RuntimeEnv struct {
	WorkingDir string            `json:"working_dir,omitempty"`
	EnvVars    map[string]string `json:"env_vars,omitempty"`
}

// SubmitResponse is POST /api/jobs/'s answer.
type SubmitResponse struct {
	JobID        string `json:"job_id"`
	SubmissionID string `json:"submission_id"`
}

// DriverInfo is the driver process of a submission job.
type DriverInfo struct {
	ID            string `json:"id"`
	NodeIPAddress string `json:"node_ip_address"`
	PID           string `json:"pid"`
}

// JobDetails is GET /api/jobs/{submission_id}'s answer.
type JobDetails struct {
	Type           string      `json:"type"`
	JobID          *string     `json:"job_id"`
	SubmissionID   string      `json:"submission_id"`
	DriverInfo     *DriverInfo `json:"driver_info"`
	Status         string      `json:"status"`
	Entrypoint     string      `json:"entrypoint"`
	Message        string      `json:"message"`
	ErrorType      *string     `json:"error_type"`
	StartTime      *int64      `json:"start_time"` // Unix ms
	EndTime        *int64      `json:"end_time"`
	DriverNodeID   *string     `json:"driver_node_id"`
	DriverExitCode *int        `json:"driver_exit_code"`
}

// StopResponse is POST /api/jobs/{id}/stop's answer.
type StopResponse struct {
	Stopped bool `json:"stopped"`
}

// LogsResponse is GET /api/jobs/{id}/logs's answer: the whole log so far.
type LogsResponse struct {
	Logs string `json:"logs"`
}

// NodeState is one row of GET /api/v0/nodes?detail=true.
type NodeState struct {
	NodeID         string             `json:"node_id"`
	NodeIP         string             `json:"node_ip"`
	IsHeadNode     bool               `json:"is_head_node"`
	State          string             `json:"state"` // ALIVE or DEAD
	NodeName       string             `json:"node_name"`
	ResourcesTotal map[string]float64 `json:"resources_total"`
	Labels         map[string]string  `json:"labels,omitempty"`
}

// NodesResponse is the state API's envelope around the node list
// (dashboard/state_aggregator.py: rest_response with result=ListApiResponse).
type NodesResponse struct {
	Result bool   `json:"result"`
	Msg    string `json:"msg"`
	Data   struct {
		Result struct {
			Total  int         `json:"total"`
			Result []NodeState `json:"result"`
		} `json:"result"`
	} `json:"data"`
}

// alreadyExists is the text Ray's job manager puts in its 400 answer to a
// submission_id that is taken (job_manager.py submit_job).
const alreadyExists = "already exists"

// ErrNotFound is a 404 from the Jobs API: Ray does not know the job.
var ErrNotFound = errors.New("ray: job not found")

// HTTPError is a Jobs API answer other than 2xx: Ray answers errors with
// a text body (often a Python traceback).
type HTTPError struct {
	Status int
	Body   string
}

func (e *HTTPError) Error() string {
	body := strings.TrimSpace(e.Body)
	if i := strings.LastIndexByte(body, '\n'); i >= 0 { // a traceback's last line says what went wrong
		body = body[i+1:]
	}
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	return fmt.Sprintf("ray: HTTP %d: %s", e.Status, body)
}

// Unreachable reports whether err says the cluster could not be asked
// (transport error, 5xx, auth refused) rather than that it answered no.
// Such errors count against the breaker.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, ErrNotFound) {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status >= 500 || he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden
	}
	return !errors.Is(err, context.Canceled)
}

// client calls one Ray head's dashboard HTTP API.
type client struct {
	base  string // e.g. http://head:8265, no trailing slash
	token string
	http  *http.Client
}

// do sends a request and decodes a 2xx JSON answer into out (when not
// nil). A 404 is ErrNotFound; other failures are *HTTPError or transport
// errors.
func (c *client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("ray: %s %s: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s", ErrNotFound, strings.TrimSpace(string(b)))
	}
	if resp.StatusCode/100 != 2 {
		return &HTTPError{Status: resp.StatusCode, Body: string(b)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("ray: %s %s: bad answer: %w", method, path, err)
	}
	return nil
}

// submit submits a job; a submission_id Ray already has counts as
// success (the retried submit of the same attempt).
func (c *client) submit(ctx context.Context, r SubmitRequest) error {
	err := c.do(ctx, http.MethodPost, "/api/jobs/", r, &SubmitResponse{})
	var he *HTTPError
	if errors.As(err, &he) && he.Status == http.StatusBadRequest && strings.Contains(he.Body, alreadyExists) {
		return nil
	}
	return err
}

func (c *client) job(ctx context.Context, id string) (JobDetails, error) {
	var d JobDetails
	err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id), nil, &d)
	return d, err
}

func (c *client) stop(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/jobs/"+url.PathEscape(id)+"/stop", nil, &StopResponse{})
}

func (c *client) logs(ctx context.Context, id string) (string, error) {
	var l LogsResponse
	err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id)+"/logs", nil, &l)
	return l.Logs, err
}

func (c *client) nodes(ctx context.Context) ([]NodeState, error) {
	var r NodesResponse
	if err := c.do(ctx, http.MethodGet, "/api/v0/nodes?detail=true&limit=10000", nil, &r); err != nil {
		return nil, err
	}
	if !r.Result {
		return nil, fmt.Errorf("ray: node list: %s", r.Msg)
	}
	return r.Data.Result.Result, nil
}
