package raytest

// The Jobs API's submissions: common.py's JobSubmitRequest, the job
// supervisor's process handling (its own process group, stop with
// SIGTERM then SIGKILL after RAY_JOB_STOP_WAIT_TIME_S), and JobDetails.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

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
