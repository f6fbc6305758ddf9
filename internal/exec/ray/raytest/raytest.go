// Package raytest is an emulator of a Ray cluster's head, for tests: Ray
// cannot be installed where Corral is built and tested. It serves the part
// of the Ray Jobs API and the state API that Corral's Ray executor uses,
// following Ray's own source (ray-project/ray, dashboard/modules/job:
// job_head.py routes and error answers, common.py JobStatus and
// JobSubmitRequest, pydantic_models.py JobDetails; the state API's
// /api/v0/nodes envelope), and runs each job's entrypoint as a real
// process (/bin/sh -c, its own process group, stdout and stderr as the
// job's log), as Ray's job supervisor does.
//
// What it leaves out: packages and runtime_env other than env_vars,
// driver jobs, log tailing over WebSocket, job deletion. Entrypoints run
// on this machine whatever node they are pinned to; a node is only a name,
// an IP and GPU and CPU counts.
package raytest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	osexec "os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Node is one node of the emulated cluster.
type Node struct {
	IP    string // also its node_name
	GPUs  int
	CPUs  float64 // default 8
	Model string  // accelerator_type; empty: none
	Head  bool
	Dead  bool
}

// Options configure a Cluster.
type Options struct {
	Nodes []Node // default: one head node 10.0.0.1 with 2 GPUs
	// Token, when set, turns on Ray's token auth: every request must carry
	// "Authorization: Bearer <Token>" (401 without, 403 with another).
	Token string
}

// Cluster is a running emulated Ray head. Its methods are safe for
// concurrent use.
type Cluster struct {
	// URL is the dashboard's address (http://127.0.0.1:PORT).
	URL string
	srv *httptest.Server

	mu          sync.Mutex
	opts        Options
	nodeIDs     map[string]string // IP -> node_id (hex)
	jobs        map[string]*job
	order       []string
	unreachable bool
	requests    map[string]int // "METHOD path" -> count
}

type job struct {
	req        submitRequest
	status     string
	message    string
	errorType  *string
	start, end *int64
	exitCode   *int
	pid        int
	node       string // IP
	gpus       []int
	logs       *logBuffer
	proc       *osexec.Cmd
	stopReq    bool
	done       chan struct{}
}

// New starts an emulated cluster; Close stops it and kills its jobs.
func New(opts Options) *Cluster {
	if len(opts.Nodes) == 0 {
		opts.Nodes = []Node{{IP: "10.0.0.1", GPUs: 2, Head: true}}
	}
	c := &Cluster{opts: opts, nodeIDs: map[string]string{}, jobs: map[string]*job{}, requests: map[string]int{}}
	for _, n := range opts.Nodes {
		c.nodeIDs[n.IP] = newID(28)
	}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	c.URL = c.srv.URL
	return c
}

// Close kills every job's processes and stops the server.
func (c *Cluster) Close() {
	c.killAll()
	c.srv.Close()
}

// Restart emulates a head restart without GCS fault tolerance: every job
// is killed and forgotten (GET /api/jobs/ID then answers 404).
func (c *Cluster) Restart() {
	c.killAll()
	c.mu.Lock()
	c.jobs, c.order = map[string]*job{}, nil
	c.mu.Unlock()
}

// SetUnreachable makes the head drop every connection (true) or serve
// again (false), as a head that is down or cut off. Jobs keep running.
func (c *Cluster) SetUnreachable(down bool) {
	c.mu.Lock()
	c.unreachable = down
	c.mu.Unlock()
}

// SetNodes replaces the cluster's nodes (a node that joins, dies or
// leaves).
func (c *Cluster) SetNodes(nodes []Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.Nodes = nodes
	for _, n := range nodes {
		if c.nodeIDs[n.IP] == "" {
			c.nodeIDs[n.IP] = newID(28)
		}
	}
}

// Requests says how many requests "METHOD /path" the head answered.
func (c *Cluster) Requests(methodPath string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[methodPath]
}

// Job is what the emulator knows of a submission, for assertions.
type Job struct {
	Status              string
	Entrypoint          string
	EnvVars             map[string]string
	EntrypointNumGPUs   *float64
	EntrypointResources map[string]float64
	Node                string // the IP it runs on
	PID                 int
	ExitCode            *int
}

// Job returns the submission's state; ok is false if the head does not
// know it.
func (c *Cluster) Job(submissionID string) (Job, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[submissionID]
	if !ok {
		return Job{}, false
	}
	out := Job{Status: j.status, Entrypoint: j.req.Entrypoint, EntrypointNumGPUs: j.req.EntrypointNumGPUs,
		EntrypointResources: j.req.EntrypointResources, Node: j.node, PID: j.pid, ExitCode: j.exitCode}
	if j.req.RuntimeEnv != nil {
		out.EnvVars = j.req.RuntimeEnv.EnvVars
	}
	return out, true
}

// Submissions lists the submission ids the head knows, in order.
func (c *Cluster) Submissions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

func (c *Cluster) killAll() {
	c.mu.Lock()
	var procs []*job
	for _, j := range c.jobs {
		if j.proc != nil && j.end == nil {
			procs = append(procs, j)
		}
	}
	c.mu.Unlock()
	for _, j := range procs {
		syscall.Kill(-j.proc.Process.Pid, syscall.SIGKILL)
		<-j.done
	}
}

func newID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func nowMS() *int64 {
	t := time.Now().UnixMilli()
	return &t
}

// serve routes a request as Ray's dashboard does.
func (c *Cluster) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	down := c.unreachable
	c.requests[r.Method+" "+r.URL.Path]++
	token := c.opts.Token
	c.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		http.Error(w, "unreachable", http.StatusServiceUnavailable)
		return
	}
	if token != "" {
		// Ray's token auth middleware (dashboard http_server_head.py).
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case r.Header.Get("Authorization") == "" || !ok:
			http.Error(w, "Unauthorized: Missing authentication token", http.StatusUnauthorized)
			return
		case got != token:
			http.Error(w, "Forbidden: Invalid authentication token", http.StatusForbidden)
			return
		}
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/api/version":
		writeJSON(w, map[string]string{"version": "1", "ray_version": "2.52.0 (corral raytest emulator)", "ray_commit": "emulated"})
	case r.Method == http.MethodGet && path == "/api/v0/nodes":
		c.listNodes(w, r)
	case r.Method == http.MethodPost && path == "/api/jobs/":
		c.submit(w, r)
	case r.Method == http.MethodGet && path == "/api/jobs/":
		c.listJobs(w)
	case strings.HasPrefix(path, "/api/jobs/"):
		rest := strings.TrimPrefix(path, "/api/jobs/")
		id, action, _ := strings.Cut(rest, "/")
		switch {
		case r.Method == http.MethodGet && action == "":
			c.getJob(w, id)
		case r.Method == http.MethodPost && action == "stop":
			c.stop(w, id)
		case r.Method == http.MethodGet && action == "logs":
			c.getLogs(w, id)
		default:
			http.NotFound(w, r)
		}
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// traceback answers as Ray does on an exception: the Python traceback as
// text, its last line the exception.
func traceback(w http.ResponseWriter, status int, exc string) {
	http.Error(w, "Traceback (most recent call last):\n  File \"dashboard/modules/job/job_head.py\", in submit_job\n"+exc, status)
}

func (c *Cluster) listNodes(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rows := []map[string]any{}
	for _, n := range c.opts.Nodes {
		res := map[string]float64{"CPU": n.CPUs, "memory": 16 << 30, "object_store_memory": 4 << 30, "node:" + n.IP: 1}
		if n.CPUs == 0 {
			res["CPU"] = 8
		}
		if n.GPUs > 0 {
			res["GPU"] = float64(n.GPUs)
		}
		if n.Model != "" {
			res["accelerator_type:"+n.Model] = 1
		}
		if n.Head {
			res["node:__internal_head__"] = 1
		}
		state := "ALIVE"
		if n.Dead {
			state = "DEAD"
		}
		rows = append(rows, map[string]any{"node_id": c.nodeIDs[n.IP], "node_ip": n.IP, "is_head_node": n.Head, "state": state,
			"state_message": nil, "node_name": n.IP, "resources_total": res, "labels": map[string]string{"ray.io/node_id": c.nodeIDs[n.IP]}})
	}
	writeJSON(w, map[string]any{"result": true, "msg": "", "data": map[string]any{"result": map[string]any{
		"total": len(rows), "num_after_truncation": len(rows), "num_filtered": len(rows), "result": rows,
		"partial_failure_warning": "", "warnings": nil}}})
}
