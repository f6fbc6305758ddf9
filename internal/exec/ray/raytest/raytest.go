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
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"sort"
	"strconv"
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

// submitRequest is common.py's JobSubmitRequest.
type submitRequest struct {
	Entrypoint          string             `json:"entrypoint"`
	SubmissionID        *string            `json:"submission_id"`
	JobID               *string            `json:"job_id"` // deprecated spelling of submission_id
	RuntimeEnv          *runtimeEnv        `json:"runtime_env"`
	Metadata            map[string]string  `json:"metadata"`
	EntrypointNumCPUs   *float64           `json:"entrypoint_num_cpus"`
	EntrypointNumGPUs   *float64           `json:"entrypoint_num_gpus"`
	EntrypointMemory    *int64             `json:"entrypoint_memory"`
	EntrypointResources map[string]float64 `json:"entrypoint_resources"`
	EntrypointLabelSel  map[string]string  `json:"entrypoint_label_selector"`
}

type runtimeEnv struct {
	EnvVars    map[string]string `json:"env_vars"`
	WorkingDir string            `json:"working_dir"`
}

func (c *Cluster) submit(w http.ResponseWriter, r *http.Request) {
	var req submitRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		// A dataclass built from unexpected or mistyped JSON raises TypeError: 400.
		traceback(w, http.StatusBadRequest, "TypeError: "+err.Error())
		return
	}
	if req.Entrypoint == "" {
		traceback(w, http.StatusBadRequest, "TypeError: entrypoint must be a string, got <class 'NoneType'>")
		return
	}
	for _, v := range []*float64{req.EntrypointNumCPUs, req.EntrypointNumGPUs} {
		if v != nil && *v < 0 {
			traceback(w, http.StatusBadRequest, "ValueError: entrypoint_num_cpus and entrypoint_num_gpus must be non-negative")
			return
		}
	}
	id := "raysubmit_" + newID(8)
	if req.SubmissionID != nil {
		id = *req.SubmissionID
	} else if req.JobID != nil {
		id = *req.JobID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.jobs[id]; dup {
		traceback(w, http.StatusBadRequest, fmt.Sprintf("ValueError: Job with submission_id %s already exists. Please use a different submission_id.", id))
		return
	}
	j := &job{req: req, status: "PENDING", message: "Job has not started yet.", logs: &logBuffer{}, done: make(chan struct{})}
	c.jobs[id] = j
	c.order = append(c.order, id)
	c.scheduleLocked()
	writeJSON(w, map[string]string{"job_id": id, "submission_id": id})
}

// scheduleLocked starts every pending job whose resources are free on an
// alive node (entrypoint_resources "node:IP" pins it). c.mu held.
func (c *Cluster) scheduleLocked() {
	for _, id := range c.order {
		j := c.jobs[id]
		if j.status != "PENDING" || j.stopReq {
			continue
		}
		for _, n := range c.opts.Nodes {
			if gpus, ok := c.fitsLocked(j, n); ok {
				c.startLocked(id, j, n, gpus)
				break
			}
		}
	}
}

// fitsLocked says whether j can run on n now, and on which GPUs.
func (c *Cluster) fitsLocked(j *job, n Node) ([]int, bool) {
	if n.Dead {
		return nil, false
	}
	for r := range j.req.EntrypointResources {
		if strings.HasPrefix(r, "node:") && r != "node:"+n.IP {
			return nil, false
		}
	}
	want := 0
	if j.req.EntrypointNumGPUs != nil {
		want = int(*j.req.EntrypointNumGPUs + 0.999)
	}
	used := map[int]bool{}
	for _, o := range c.jobs {
		if o.node == n.IP && o.end == nil && o.proc != nil {
			for _, g := range o.gpus {
				used[g] = true
			}
		}
	}
	var free []int
	for g := 0; g < n.GPUs && len(free) < want; g++ {
		if !used[g] {
			free = append(free, g)
		}
	}
	return free, len(free) == want
}

func (c *Cluster) startLocked(id string, j *job, n Node, gpus []int) {
	cmd := osexec.Command("/bin/sh", "-c", j.req.Entrypoint)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = os.Environ()
	if j.req.RuntimeEnv != nil {
		for k, v := range j.req.RuntimeEnv.EnvVars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	vis := make([]string, len(gpus))
	for i, g := range gpus {
		vis[i] = strconv.Itoa(g)
	}
	cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+strings.Join(vis, ","), "RAY_JOB_SUBMISSION_ID="+id, "RAY_ADDRESS=emulated")
	cmd.Stdout, cmd.Stderr = j.logs, j.logs
	j.node, j.gpus = n.IP, gpus
	if err := cmd.Start(); err != nil {
		j.status, j.message, j.end = "FAILED", "Job entrypoint command failed to start: "+err.Error(), nowMS()
		et := "JOB_ENTRYPOINT_COMMAND_START_ERROR"
		j.errorType = &et
		close(j.done)
		return
	}
	j.proc, j.pid, j.status, j.message, j.start = cmd, cmd.Process.Pid, "RUNNING", "Job is currently running.", nowMS()
	go c.wait(j)
}

// wait records the entrypoint's end as Ray's supervisor does: 0 is
// SUCCEEDED; a stop request is STOPPED; else FAILED with the exit code
// (Python's returncode: -N when killed by signal N).
func (c *Cluster) wait(j *job) {
	err := j.proc.Wait()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*osexec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = -int(ws.Signal())
			} else {
				code = ee.ExitCode()
			}
		}
	}
	c.mu.Lock()
	j.end, j.exitCode = nowMS(), &code
	switch {
	case j.stopReq:
		j.status, j.message = "STOPPED", "Job was intentionally stopped."
	case code == 0:
		j.status, j.message = "SUCCEEDED", "Job finished successfully."
	default:
		j.status, j.message = "FAILED", fmt.Sprintf("Job entrypoint command failed with exit code %d, last available logs (truncated to 20,000 chars):\n%s", code, j.logs.tail(20000))
		et := "JOB_ENTRYPOINT_COMMAND_ERROR"
		j.errorType = &et
	}
	c.scheduleLocked()
	c.mu.Unlock()
	close(j.done)
}

func (c *Cluster) details(id string, j *job) map[string]any {
	var driver any
	var jobID any
	if j.proc != nil {
		jid := fmt.Sprintf("%02x000000", len(c.order))
		jobID = jid
		driver = map[string]string{"id": jid, "node_ip_address": j.node, "pid": strconv.Itoa(j.pid)}
	}
	var nodeID any
	if j.node != "" {
		nodeID = c.nodeIDs[j.node]
	}
	var re any
	if j.req.RuntimeEnv != nil {
		re = j.req.RuntimeEnv
	}
	return map[string]any{"type": "SUBMISSION", "job_id": jobID, "submission_id": id, "driver_info": driver,
		"status": j.status, "entrypoint": j.req.Entrypoint, "message": j.message, "error_type": j.errorType,
		"start_time": j.start, "end_time": j.end, "metadata": j.req.Metadata, "runtime_env": re,
		"driver_agent_http_address": nil, "driver_node_id": nodeID, "driver_exit_code": j.exitCode,
		"entrypoint_num_cpus": j.req.EntrypointNumCPUs, "entrypoint_num_gpus": j.req.EntrypointNumGPUs,
		"entrypoint_memory": j.req.EntrypointMemory, "entrypoint_resources": j.req.EntrypointResources}
}

func (c *Cluster) getJob(w http.ResponseWriter, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[id]
	if !ok {
		http.Error(w, fmt.Sprintf("Job %s does not exist", id), http.StatusNotFound)
		return
	}
	writeJSON(w, c.details(id, j))
}

func (c *Cluster) listJobs(w http.ResponseWriter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []map[string]any{}
	ids := append([]string(nil), c.order...)
	sort.Strings(ids)
	for _, id := range ids {
		out = append(out, c.details(id, c.jobs[id]))
	}
	writeJSON(w, out)
}

// stop is JobManager.stop_job: SIGTERM to the driver's process group, then
// SIGKILL after RAY_JOB_STOP_WAIT_TIME_S (default 3s); stopped is false
// for a job already ended.
func (c *Cluster) stop(w http.ResponseWriter, id string) {
	c.mu.Lock()
	j, ok := c.jobs[id]
	if !ok {
		c.mu.Unlock()
		http.Error(w, fmt.Sprintf("Job %s does not exist", id), http.StatusNotFound)
		return
	}
	if j.end != nil || j.stopReq {
		c.mu.Unlock()
		writeJSON(w, map[string]bool{"stopped": false})
		return
	}
	j.stopReq = true
	if j.proc == nil { // pending: never runs
		j.status, j.message, j.end = "STOPPED", "Job was intentionally stopped.", nowMS()
		close(j.done)
		c.mu.Unlock()
		writeJSON(w, map[string]bool{"stopped": true})
		return
	}
	wait := 3 * time.Second
	if j.req.RuntimeEnv != nil {
		if s, err := strconv.ParseFloat(j.req.RuntimeEnv.EnvVars["RAY_JOB_STOP_WAIT_TIME_S"], 64); err == nil && s >= 0 {
			wait = time.Duration(s * float64(time.Second))
		}
	}
	pgid := j.proc.Process.Pid
	c.mu.Unlock()
	syscall.Kill(-pgid, syscall.SIGTERM)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		select {
		case <-j.done:
		case <-ctx.Done():
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	writeJSON(w, map[string]bool{"stopped": true})
}

func (c *Cluster) getLogs(w http.ResponseWriter, id string) {
	c.mu.Lock()
	j, ok := c.jobs[id]
	c.mu.Unlock()
	if !ok {
		http.Error(w, fmt.Sprintf("Job %s does not exist", id), http.StatusNotFound)
		return
	}
	writeJSON(w, map[string]string{"logs": j.logs.String()})
}

// logBuffer is a job's combined stdout and stderr.
type logBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

func (l *logBuffer) tail(n int) string {
	s := l.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
