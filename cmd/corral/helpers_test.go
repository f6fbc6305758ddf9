package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// seen is one request the fake server got.
type seen struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// fakeServer is a Corral API stand-in: it records requests and answers each
// "METHOD /path" with a canned status and body.
type fakeServer struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	reqs    []seen
	answers map[string]answer
}

type answer struct {
	status int
	body   any // marshaled as JSON unless it is a string
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, answers: map[string]answer{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	// No ambient configuration leaks into the tests.
	t.Setenv("CORRAL_SERVER", "")
	t.Setenv("CORRAL_TOKEN", "")
	t.Setenv("CORRAL_CONFIG", filepath.Join(t.TempDir(), "client.json"))
	return f
}

func (f *fakeServer) on(method, path string, status int, body any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[method+" "+path] = answer{status, body}
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), b})
	a, ok := f.answers[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
	if !ok {
		a = answer{http.StatusNotFound, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no route " + r.URL.Path}}}
	}
	if s, isText := a.body.(string); isText {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, s)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(a.body)
}

// requests returns what the server has seen so far.
func (f *fakeServer) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// last returns the latest request, failing the test when there was none.
func (f *fakeServer) last() seen {
	f.t.Helper()
	r := f.requests()
	if len(r) == 0 {
		f.t.Fatal("the server got no request")
	}
	return r[len(r)-1]
}

// result is what one run printed.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command line against the fake server (--server first).
func (f *fakeServer) run(args ...string) result {
	return runArgs(append([]string{"--server", f.srv.URL}, args...)...)
}

// runArgs runs the command line as given.
func runArgs(args ...string) result {
	var out, errb bytes.Buffer
	code := runWith(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// columnStarts returns the byte offset where each of the words starts in
// line, or -1. Words are matched left to right, each after the previous one,
// so that short cells ("0", "up") are found in their own column.
func columnStarts(line string, words ...string) []int {
	offs := make([]int, len(words))
	from := 0
	for i, w := range words {
		k := strings.Index(line[from:], w)
		if k < 0 {
			offs[i] = -1
			continue
		}
		offs[i] = from + k
		from += k + len(w)
	}
	return offs
}

var (
	t0      = time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	started = t0.Add(2 * time.Minute)
	ended   = t0.Add(5 * time.Minute)
	exit0   = 0
	temp    = 41
	wait    = 250.0
	estAt   = time.Now().Add(250 * time.Second).UTC()
)

func sampleJob() api.Job {
	return api.Job{
		ID: "01JAAAAAAAAAAAAAAAAAAAAAAA", Name: "train-resnet", User: "alice", Project: "vision",
		Command: "python train.py --lr 3e-4", Workdir: "/home/alice/rn", Env: map[string]string{"SEED": "1"},
		GPUCount: 2, Nodes: 1, Priority: api.PriorityHigh, State: api.StateCompleted,
		Reason: api.ReasonExited, SubmittedAt: t0, StartedAt: &started, FinishedAt: &ended, ExitCode: &exit0,
		Allocation: []api.Allocation{
			{NodeID: "node-a", GPUID: 0, GPUUUID: "GPU-1111", MemoryGB: 80},
			{NodeID: "node-a", GPUID: 1, GPUUUID: "GPU-2222", MemoryGB: 80, Simulated: true},
		},
		Events: []api.Event{
			{At: t0, To: api.StateQueued, Reason: api.ReasonSubmitted},
			{At: started, From: api.StateAllocating, To: api.StateRunning, Reason: api.ReasonStarted},
			{At: ended, From: api.StateRunning, To: api.StateCompleted, Reason: api.ReasonExited, Message: "exit code 0"},
		},
	}
}

func sampleQueue() api.QueueResponse {
	return api.QueueResponse{
		QueuedJobs: []api.QueuedJob{
			{ID: "01JQUEUED1", Name: "short", User: "bob", Priority: api.PriorityNormal, RequestedGPUs: 1, Nodes: 1,
				QueuedAt: t0, QueuePosition: 1, EstimatedStartTime: &estAt, EstimatedWaitTime: &wait, WaitedSeconds: 192,
				PendingReason: "resources", PendingMessage: "waiting for 1 free GPU"},
			{ID: "01JQUEUED2LONGER", Name: "gang", User: "carol-the-long", Priority: api.PriorityCritical, RequestedGPUs: 8, Nodes: 2, // 2 nodes x 4
				QueuedAt: t0, QueuePosition: 2, WaitedSeconds: 5, PendingReason: "gang", PendingMessage: "needs 2 nodes with 4 free GPUs"},
		},
		Statistics: api.QueueStatistics{TotalQueued: 2, TotalRunning: 1, AverageWaitTime: 60, WaitTimeP50: 30, WaitTimeP95: 120, QueueThroughput: 4},
	}
}

func sampleCluster() api.ClusterStatus {
	return api.ClusterStatus{
		TotalGPUs: 3, AvailableGPUs: 1, AllocatedGPUs: 2, HeldGPUs: 1,
		Nodes: []api.Node{
			{NodeID: "node-a", Hostname: "gpu01", GPUCount: 2, GPUType: "H100", State: "up", GPUs: []api.GPU{
				{ID: 0, UUID: "GPU-1111", Model: "NVIDIA H100 80GB HBM3", MemoryTotal: 81559, MemoryUsed: 1024, Utilization: 97, Temperature: &temp, AllocatedTo: ptr("01JAAAAAAAAAAAAAAAAAAAAAAA")},
				{ID: 1, UUID: "GPU-2222", Model: "NVIDIA H100 80GB HBM3", MemoryTotal: 81559, AllocatedTo: ptr("notebook"), Held: true},
			}},
			{NodeID: "node-sim", Hostname: "laptop", GPUCount: 1, GPUType: "A100", State: "up", Simulated: true, GPUs: []api.GPU{
				{ID: 0, UUID: "SIM-0", Model: "A100", MemoryTotal: 40960, Simulated: true},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }
