package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestLifecycle walks one server through what a user does: submit, run,
// read the output, fail, follow logs, read the queue and the cluster, retry
// a submission, change a priority, stop and start scheduling, hold GPUs,
// and use the CLI.
func TestLifecycle(t *testing.T) {
	s := startServer(t)
	work := t.TempDir()

	t.Run("submit run complete", func(t *testing.T) {
		s := s.on(t)
		before := time.Now()
		r := s.do("POST", "/queue/submit", map[string]any{
			"name":               "hello",
			"user":               "alice",
			"project":            "vision",
			"command":            `echo hello; echo $CUDA_VISIBLE_DEVICES $CORRAL_JOB_ID $CORRAL_GPUS; echo "FOO=$FOO"; echo "PWD=$(pwd)"`,
			"workdir":            work,
			"env":                map[string]string{"FOO": "bar baz"},
			"gpu_count":          2,
			"gpu_memory_gb":      40,
			"gpu_type":           "H100",
			"priority":           "high",
			"estimated_duration": "1m30s",
			"max_retries":        2,
		}, nil)
		if r.Status != http.StatusCreated {
			t.Fatalf("submit: want 201, got %s", r)
		}
		var sub api.Job
		if err := json.Unmarshal(r.Body, &sub); err != nil {
			t.Fatalf("submit answer: %v", err)
		}
		if sub.ID == "" {
			t.Fatalf("submit answered no id: %s", r.Body)
		}
		if loc := r.Header.Get("Location"); loc != "" && loc != "/jobs/"+sub.ID {
			t.Errorf("Location %q, want /jobs/%s", loc, sub.ID)
		}
		if !sub.State.Valid() || sub.State == api.StateFailed || sub.State == api.StateCanceled {
			t.Errorf("submitted job state %q", sub.State)
		}
		checks := []struct {
			field     string
			got, want any
		}{
			{"name", sub.Name, "hello"},
			{"user", sub.User, "alice"},
			{"project", sub.Project, "vision"},
			{"workdir", sub.Workdir, work},
			{"env", sub.Env["FOO"], "bar baz"},
			{"gpu_count", sub.GPUCount, 2},
			{"gpu_memory_gb", sub.GPUMemoryGB, 40.0},
			{"gpu_type", sub.GPUType, "H100"},
			{"nodes", sub.Nodes, 1},
			{"priority", sub.Priority, api.PriorityHigh},
			{"max_retries", sub.MaxRetries, 2},
			{"retry_count", sub.RetryCount, 0},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("submitted %s: got %v, want %v", c.field, c.got, c.want)
			}
		}
		if sub.EstimatedDuration == nil || float64(*sub.EstimatedDuration) != 90 {
			t.Errorf("estimated_duration: want 90 (seconds), got %v", sub.EstimatedDuration)
		}
		if sub.SubmittedAt.Before(before.Add(-time.Second)) || sub.SubmittedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("submitted_at %v is not now", sub.SubmittedAt)
		}
		// Names, not numbers, on the wire.
		var raw map[string]any
		json.Unmarshal(r.Body, &raw)
		if raw["priority"] != "high" {
			t.Errorf(`priority on the wire: want "high", got %v`, raw["priority"])
		}

		j := s.waitState(sub.ID, api.StateCompleted, 30*time.Second)
		if j.ExitCode == nil || *j.ExitCode != 0 {
			t.Errorf("exit_code: want 0, got %v", j.ExitCode)
		}
		if j.StartedAt == nil || j.FinishedAt == nil || j.FinishedAt.Before(*j.StartedAt) || j.StartedAt.Before(j.SubmittedAt) {
			t.Errorf("times: submitted %v started %v finished %v", j.SubmittedAt, j.StartedAt, j.FinishedAt)
		}
		want := []api.State{api.StateQueued, api.StateScheduled, api.StateAllocating, api.StateRunning, api.StateCompleted}
		if got := eventStates(j); !slices.Equal(got, want) {
			t.Fatalf("events: want %v, got %v", want, got)
		}
		for i, e := range j.Events {
			if e.At.IsZero() {
				t.Errorf("event %d (%s) has no timestamp", i, e.To)
			}
			if e.Reason == "" {
				t.Errorf("event %d (%s) has no reason", i, e.To)
			}
			if i > 0 {
				if e.At.Before(j.Events[i-1].At) {
					t.Errorf("event %d (%s at %v) is before event %d (%v)", i, e.To, e.At, i-1, j.Events[i-1].At)
				}
				if e.From != j.Events[i-1].To {
					t.Errorf("event %d goes from %q, but the job was %q", i, e.From, j.Events[i-1].To)
				}
			}
		}
		if len(j.Allocation) != 2 {
			t.Fatalf("allocation: want 2 GPUs, got %+v", j.Allocation)
		}
		gpus := gpuSet(j.Allocation)
		if gpus[0] == gpus[1] || j.Allocation[0].NodeID != j.Allocation[1].NodeID || j.Allocation[0].NodeID == "" {
			t.Errorf("allocation is not 2 distinct GPUs on one node: %+v", j.Allocation)
		}
		for _, a := range j.Allocation {
			if a.GPUUUID == "" || a.MemoryGB < 40 || !a.Simulated {
				t.Errorf("allocation entry %+v: want a uuid, memory >= 40 GB and simulated", a)
			}
		}

		out := s.logs(j.ID)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || lines[0] != "hello" {
			t.Fatalf("log: want 4 lines starting with hello, got %q", out)
		}
		f := strings.Fields(lines[1])
		if len(f) != 3 {
			t.Fatalf("log line %q: want CUDA_VISIBLE_DEVICES CORRAL_JOB_ID CORRAL_GPUS", lines[1])
		}
		visible, err := parseGPUList(f[0])
		if err != nil || !slices.Equal(visible, gpus) {
			t.Errorf("CUDA_VISIBLE_DEVICES %q does not match the allocation %v", f[0], gpus)
		}
		if f[1] != j.ID {
			t.Errorf("CORRAL_JOB_ID %q, want %q", f[1], j.ID)
		}
		if f[2] != f[0] {
			t.Errorf("CORRAL_GPUS %q differs from CUDA_VISIBLE_DEVICES %q", f[2], f[0])
		}
		if lines[2] != "FOO=bar baz" {
			t.Errorf("env: want FOO=bar baz, got %q", lines[2])
		}
		if lines[3] != "PWD="+work {
			t.Errorf("workdir: want PWD=%s, got %q", work, lines[3])
		}

		// The list shows it too, and the GPUs are free again.
		found := false
		for _, x := range s.jobs() {
			found = found || (x.ID == j.ID && x.State == api.StateCompleted)
		}
		if !found {
			t.Errorf("GET /jobs does not list %s as completed", j.ID)
		}
		var filtered api.JobList
		s.mustJSON("GET", "/jobs?user=alice&state=completed", nil, 200, &filtered)
		if len(filtered.Jobs) != 1 || filtered.Jobs[0].ID != j.ID {
			t.Errorf("GET /jobs?user=alice&state=completed: want only %s, got %d jobs", j.ID, len(filtered.Jobs))
		}
		s.waitAllGPUsFree(10 * time.Second)
	})

	t.Run("failing job", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": "echo about to fail >&2; exit 3", "gpu_count": 1})
		j = s.waitState(j.ID, api.StateFailed, 30*time.Second)
		if j.ExitCode == nil || *j.ExitCode != 3 {
			t.Errorf("exit_code: want 3, got %v", j.ExitCode)
		}
		if j.FinishedAt == nil {
			t.Errorf("a failed job needs finished_at")
		}
		if last := j.Events[len(j.Events)-1]; last.To != api.StateFailed || last.From != api.StateRunning {
			t.Errorf("last event: want running -> failed, got %+v", last)
		}
		if out := s.logs(j.ID); !strings.Contains(out, "about to fail") {
			t.Errorf("stderr is not in the log: %q", out)
		}
	})

	t.Run("job that cannot start", func(t *testing.T) {
		s := s.on(t)
		missing := filepath.Join(t.TempDir(), "does-not-exist")
		j := s.submit(map[string]any{"command": "echo ran", "gpu_count": 2, "workdir": missing})
		j = s.waitState(j.ID, api.StateFailed, 30*time.Second)
		if j.Reason == "" || !strings.Contains(j.Message+" "+s.logs(j.ID), "does-not-exist") {
			t.Errorf("a job with a missing workdir should fail saying why: reason %q, message %q", j.Reason, j.Message)
		}
		if strings.Contains(s.logs(j.ID), "ran") {
			t.Errorf("the job ran without its workdir")
		}
		s.waitAllGPUsFree(10 * time.Second)
	})

	t.Run("zero GPU job", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": `echo "[$CUDA_VISIBLE_DEVICES]"`, "gpu_count": 0})
		j = s.waitState(j.ID, api.StateCompleted, 30*time.Second)
		if len(j.Allocation) != 0 {
			t.Errorf("a 0-GPU job got GPUs: %+v", j.Allocation)
		}
		if out := strings.TrimSpace(s.logs(j.ID)); out != "[]" {
			t.Errorf("a 0-GPU job must see no GPU, got CUDA_VISIBLE_DEVICES %q", out)
		}
	})

	t.Run("follow logs", func(t *testing.T) {
		s := s.on(t)
		gate := filepath.Join(t.TempDir(), "go")
		j := s.submit(map[string]any{
			"gpu_count": 1,
			"command":   fmt.Sprintf(`echo first; while [ ! -e %s ]; do sleep 0.02; done; echo second`, shellQuote(gate)),
		})
		s.waitState(j.ID, api.StateRunning, 30*time.Second)

		resp, err := s.http.Get(s.URL + "/jobs/" + j.ID + "/logs?follow=true")
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("follow: HTTP %d", resp.StatusCode)
		}
		rd := bufio.NewReader(resp.Body)
		line, err := rd.ReadString('\n')
		if err != nil || line != "first\n" {
			t.Fatalf("follow: first line %q, %v", line, err)
		}
		// The job is still running (it waits for the gate): the stream
		// delivered output before the end.
		if st := s.job(j.ID).State; st != api.StateRunning {
			t.Fatalf("the job is %s before the gate opened", st)
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rest, err := readAllWithin(rd, 30*time.Second)
		if err != nil {
			t.Fatalf("follow: the stream did not end after the job ended: %v (got %q)", err, rest)
		}
		if rest != "second\n" {
			t.Errorf("follow: rest of the stream %q, want %q", rest, "second\n")
		}
		if st := s.job(j.ID).State; st != api.StateCompleted {
			t.Errorf("the stream ended but the job is %s", st)
		}
	})

	t.Run("idempotency key", func(t *testing.T) {
		s := s.on(t)
		n0 := len(s.jobs())
		body := map[string]any{"command": "true", "gpu_count": 1, "name": "idem"}
		key := map[string]string{"Idempotency-Key": "e2e-key-1"}
		r1 := s.do("POST", "/queue/submit", body, key)
		r2 := s.do("POST", "/queue/submit", body, key)
		if r1.Status != 201 || r2.Status != 201 {
			t.Fatalf("submits with a key: %s / %s", r1, r2)
		}
		var j1, j2 api.Job
		json.Unmarshal(r1.Body, &j1)
		json.Unmarshal(r2.Body, &j2)
		if j1.ID == "" || j1.ID != j2.ID {
			t.Fatalf("same Idempotency-Key gave jobs %q and %q", j1.ID, j2.ID)
		}
		// Concurrent retries of another key: still one job.
		var wg sync.WaitGroup
		ids := make([]string, 8)
		errs := make([]error, 8)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.send("POST", "/queue/submit", body, map[string]string{"Idempotency-Key": "e2e-key-2"})
				if err != nil || r.Status != 201 {
					errs[i] = fmt.Errorf("%v %v", err, r)
					return
				}
				var j api.Job
				errs[i] = json.Unmarshal(r.Body, &j)
				ids[i] = j.ID
			}()
		}
		wg.Wait()
		for i := range ids {
			if errs[i] != nil {
				t.Fatalf("concurrent submit with a key: %v", errs[i])
			}
			if ids[i] != ids[0] || ids[0] == "" {
				t.Fatalf("concurrent submits with one key gave different jobs: %v", ids)
			}
		}
		if ids[0] == j1.ID {
			t.Errorf("two keys gave the same job")
		}
		if n := len(s.jobs()); n != n0+2 {
			t.Errorf("two idempotency keys made %d jobs, want 2", n-n0)
		}
		s.waitState(j1.ID, api.StateCompleted, 30*time.Second)
		s.waitState(ids[0], api.StateCompleted, 30*time.Second)
	})

	t.Run("stop start priority queue", func(t *testing.T) {
		s := s.on(t)
		var st api.OrchestratorStatus
		s.mustJSON("POST", "/orchestrator/stop", nil, 200, &st)
		if st.Running {
			t.Fatalf("after POST /orchestrator/stop, status says running")
		}
		s.mustJSON("GET", "/orchestrator/status", nil, 200, &st)
		if st.Running {
			t.Fatalf("GET /orchestrator/status says running after stop")
		}
		a := s.submit(map[string]any{"command": "true", "gpu_count": 1, "user": "bob", "priority": "low"})
		b := s.submit(map[string]any{"command": "true", "gpu_count": 3, "user": "carol"})
		for _, id := range []string{a.ID, b.ID} {
			j := s.job(id)
			if j.State != api.StateQueued {
				t.Fatalf("job %s is %s while scheduling is stopped", id, j.State)
			}
			if !strings.Contains(strings.ToLower(j.PendingReason+" "+j.PendingMessage), "stop") {
				t.Errorf("pending reason of %s should say scheduling is stopped: %q / %q", id, j.PendingReason, j.PendingMessage)
			}
		}

		// PATCH priority: names and numbers, names returned.
		var p api.Job
		s.mustJSON("PATCH", "/queue/"+a.ID+"/priority", map[string]any{"priority": "critical"}, 200, &p)
		if p.Priority != api.PriorityCritical {
			t.Errorf("PATCH priority critical: got %v", p.Priority)
		}
		if s.job(a.ID).Priority != api.PriorityCritical {
			t.Errorf("PATCH priority did not stick")
		}
		r := s.mustJSON("PATCH", "/queue/"+b.ID+"/priority", map[string]any{"priority": 1}, 200, &p)
		if p.Priority != api.PriorityLow || !strings.Contains(string(r.Body), `"priority": "low"`) && !strings.Contains(string(r.Body), `"priority":"low"`) {
			t.Errorf("PATCH priority 1: want \"low\", got %s", r.Body)
		}

		// GET /queue: the documented shape, in priority order.
		var q map[string]json.RawMessage
		s.mustJSON("GET", "/queue", nil, 200, &q)
		requireKeys(t, "GET /queue", q, "queued_jobs", "statistics")
		var rows []map[string]json.RawMessage
		if err := json.Unmarshal(q["queued_jobs"], &rows); err != nil || len(rows) != 2 {
			t.Fatalf("GET /queue queued_jobs: want 2 rows, got %s (%v)", q["queued_jobs"], err)
		}
		for _, row := range rows {
			requireKeys(t, "GET /queue queued_jobs[]", row, "id", "user", "priority", "requested_gpus", "queued_at",
				"queue_position", "estimated_start_time", "estimated_wait_time")
		}
		var typed api.QueueResponse
		s.mustJSON("GET", "/queue", nil, 200, &typed)
		if typed.QueuedJobs[0].ID != a.ID || typed.QueuedJobs[0].QueuePosition != 1 || typed.QueuedJobs[1].ID != b.ID ||
			typed.QueuedJobs[1].QueuePosition != 2 || typed.QueuedJobs[1].RequestedGPUs != 3 || typed.QueuedJobs[1].User != "carol" {
			t.Errorf("GET /queue: want %s (critical) at 1 then %s (low, 3 GPUs, carol) at 2, got %+v", a.ID, b.ID, typed.QueuedJobs)
		}
		var stats map[string]json.RawMessage
		json.Unmarshal(q["statistics"], &stats)
		requireKeys(t, "GET /queue statistics", stats, "total_queued", "average_wait_time", "queue_throughput")
		s.mustJSON("GET", "/queue/statistics", nil, 200, &stats)
		requireKeys(t, "GET /queue/statistics", stats, "total_queued", "average_wait_time", "queue_throughput",
			"wait_time_p50", "wait_time_p95", "wait_time_p99")
		var qs api.QueueStatistics
		s.mustJSON("GET", "/queue/statistics", nil, 200, &qs)
		if qs.TotalQueued != 2 {
			t.Errorf("total_queued: want 2, got %d", qs.TotalQueued)
		}
		started := 0
		for _, x := range s.jobs() {
			if x.StartedAt != nil {
				started++
			}
		}
		if qs.QueueThroughput != float64(started) { // jobs started in the last hour
			t.Errorf("queue_throughput: want %d jobs/hour, got %v", started, qs.QueueThroughput)
		}

		// Start: both run.
		s.mustJSON("POST", "/orchestrator/start", nil, 200, &st)
		if !st.Running {
			t.Errorf("after POST /orchestrator/start, status says not running")
		}
		s.waitState(a.ID, api.StateCompleted, 30*time.Second)
		s.waitState(b.ID, api.StateCompleted, 30*time.Second)

		// A finished job's priority cannot change.
		r = s.do("PATCH", "/queue/"+a.ID+"/priority", map[string]any{"priority": "high"}, nil)
		if r.Status != http.StatusConflict {
			t.Errorf("PATCH priority of a completed job: want 409, got %s", r)
		}
	})

	t.Run("orchestrator and cluster shapes", func(t *testing.T) {
		s := s.on(t)
		var st map[string]json.RawMessage
		s.mustJSON("GET", "/orchestrator/status", nil, 200, &st)
		requireKeys(t, "GET /orchestrator/status", st, "running", "policy")
		var ost api.OrchestratorStatus
		s.mustJSON("GET", "/orchestrator/status", nil, 200, &ost)
		if !ost.Running || ost.Policy == "" || ost.Cycles == 0 {
			t.Errorf("orchestrator status: %+v", ost)
		}

		var pol api.Policies
		s.mustJSON("GET", "/orchestrator/policies", nil, 200, &pol)
		if pol.Policy == "" || !slices.Contains(pol.Available, pol.Policy) || !pol.Gang {
			t.Errorf("policies: want an active policy among the available ones and gang on, got %+v", pol)
		}
		if slices.Contains(pol.Available, "fcfs") {
			var np api.Policies
			s.mustJSON("PUT", "/orchestrator/policies", map[string]any{"policy": "fcfs"}, 200, &np)
			if np.Policy != "fcfs" {
				t.Errorf("PUT policy fcfs: got %+v", np)
			}
			s.mustJSON("PUT", "/orchestrator/policies", map[string]any{"policy": pol.Policy}, 200, &np)
			if np.Policy != pol.Policy {
				t.Errorf("PUT policy back to %s: got %+v", pol.Policy, np)
			}
		}

		var cs map[string]json.RawMessage
		s.mustJSON("GET", "/cluster/gpu-status", nil, 200, &cs)
		requireKeys(t, "GET /cluster/gpu-status", cs, "total_gpus", "available_gpus", "allocated_gpus", "nodes")
		var nodes []map[string]json.RawMessage
		json.Unmarshal(cs["nodes"], &nodes)
		if len(nodes) != 1 {
			t.Fatalf("gpu-status: want 1 node, got %d", len(nodes))
		}
		requireKeys(t, "gpu-status nodes[]", nodes[0], "node_id", "hostname", "gpu_count", "gpu_type", "state", "gpus")
		var gpus []map[string]json.RawMessage
		json.Unmarshal(nodes[0]["gpus"], &gpus)
		if len(gpus) != 8 {
			t.Fatalf("gpu-status: want 8 GPUs, got %d", len(gpus))
		}
		for _, g := range gpus[:1] { // all 8 are free and alike: once is enough
			requireKeys(t, "gpu-status gpus[] (a free GPU)", g, "id", "uuid", "memory_total", "memory_used", "utilization", "temperature", "allocated_to")
		}
		c := s.cluster()
		n := c.Nodes[0]
		if c.TotalGPUs != 8 || c.AvailableGPUs != 8 || c.AllocatedGPUs != 0 || n.GPUCount != 8 || n.State != "up" || n.NodeID == "" {
			t.Errorf("gpu-status: %d total, %d available, %d allocated; node %s has %d GPUs, state %q",
				c.TotalGPUs, c.AvailableGPUs, c.AllocatedGPUs, n.NodeID, n.GPUCount, n.State)
		}
		if !n.Simulated {
			t.Errorf("the simulated node is not marked simulated")
		}
		seen := map[int]bool{}
		for _, g := range n.GPUs {
			if !g.Simulated || g.UUID == "" || g.MemoryTotal <= 0 || seen[g.ID] {
				t.Errorf("GPU %+v: want simulated, a uuid, memory, a unique id", g)
			}
			seen[g.ID] = true
		}

		r := s.do("GET", "/healthz", nil, nil)
		if r.Status != 200 {
			t.Errorf("healthz: %s", r)
		}
		r = s.do("GET", "/metrics", nil, nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), "# TYPE") {
			t.Errorf("metrics: want Prometheus text, got %s", r)
		}
		r = s.do("GET", "/openapi.json", nil, nil)
		var oa map[string]any
		if r.Status != 200 || json.Unmarshal(r.Body, &oa) != nil || oa["openapi"] == nil {
			t.Errorf("openapi.json: %s", r)
		}
	})

	t.Run("held GPUs", func(t *testing.T) {
		s := s.on(t)
		var h api.Hold
		s.mustJSON("POST", "/cluster/gpu-allocate", map[string]any{"job_id": "notebook-1", "gpu_count": 2, "memory_gb": 40}, 201, &h)
		if h.JobID != "notebook-1" || len(h.Allocation) != 2 {
			t.Fatalf("gpu-allocate: %+v", h)
		}
		held := gpuSet(h.Allocation)
		c := s.cluster()
		if c.AvailableGPUs != 6 || c.AllocatedGPUs != 2 {
			t.Errorf("with 2 held: available %d, allocated %d", c.AvailableGPUs, c.AllocatedGPUs)
		}
		for _, g := range c.Nodes[0].GPUs {
			isHeld := slices.Contains(held, g.ID)
			if isHeld != (g.Holder() == "notebook-1") {
				t.Errorf("GPU %d allocated_to %q; held GPUs are %v", g.ID, g.Holder(), held)
			}
		}
		// The same name twice, or more than is free: 409.
		if r := s.do("POST", "/cluster/gpu-allocate", map[string]any{"job_id": "notebook-1", "gpu_count": 1}, nil); r.Status != 409 {
			t.Errorf("holding under a taken name: want 409, got %s", r)
		}
		if r := s.do("POST", "/cluster/gpu-allocate", map[string]any{"job_id": "notebook-2", "gpu_count": 7}, nil); r.Status != 409 {
			t.Errorf("holding 7 with 6 free: want 409, got %s", r)
		} else {
			errorBody(t, r)
		}

		// An 8-GPU job waits while GPUs are held; a job that fits beside the
		// hold runs.
		big := s.submit(map[string]any{"command": "echo $CUDA_VISIBLE_DEVICES", "gpu_count": 8})
		s.waitJob(big.ID, 30*time.Second, "to wait for GPUs", func(j api.Job) bool {
			if j.State != api.StateQueued {
				t.Fatalf("the 8-GPU job is %s while 2 GPUs are held", j.State)
			}
			return j.PendingReason != "" && j.PendingReason != "scheduling_stopped"
		})
		small := s.submit(map[string]any{"command": "echo $CUDA_VISIBLE_DEVICES", "gpu_count": 2, "priority": "critical"})
		sj := s.waitState(small.ID, api.StateCompleted, 30*time.Second)
		for _, g := range gpuSet(sj.Allocation) {
			if slices.Contains(held, g) {
				t.Errorf("job %s got held GPU %d", small.ID, g)
			}
		}
		if j := s.job(big.ID); j.State != api.StateQueued {
			t.Fatalf("the 8-GPU job is %s while 2 GPUs are held", j.State)
		}

		var rel api.Hold
		s.mustJSON("POST", "/cluster/gpu-release", map[string]any{"job_id": "notebook-1"}, 200, &rel)
		j := s.waitState(big.ID, api.StateCompleted, 30*time.Second)
		if len(j.Allocation) != 8 {
			t.Errorf("the 8-GPU job ran on %d GPUs", len(j.Allocation))
		}
		if r := s.do("POST", "/cluster/gpu-release", map[string]any{"job_id": "notebook-1"}, nil); r.Status != 404 {
			t.Errorf("releasing twice: want 404, got %s", r)
		}
		s.waitAllGPUsFree(10 * time.Second)
	})

	t.Run("cli", func(t *testing.T) {
		s := s.on(t)
		env := []string{"CORRAL_SERVER=" + s.URL}
		stdout, stderr, code := runCLI(t, env, "submit", "-o", "json", "--gpus", "1", "--name", "from-cli", "--", `echo cli-$CORRAL_JOB_ID`)
		if code != 0 {
			t.Fatalf("corral submit: exit %d, stderr %s", code, stderr)
		}
		var j api.Job
		if err := json.Unmarshal([]byte(stdout), &j); err != nil || j.ID == "" {
			t.Fatalf("corral submit -o json printed %q (%v)", stdout, err)
		}
		j = s.waitState(j.ID, api.StateCompleted, 30*time.Second)
		if out := strings.TrimSpace(s.logs(j.ID)); out != "cli-"+j.ID {
			t.Errorf("the CLI's job printed %q", out)
		}
		if j.Name != "from-cli" || j.GPUCount != 1 {
			t.Errorf("the CLI's job: name %q, %d GPUs", j.Name, j.GPUCount)
		}

		stdout, stderr, code = runCLI(t, env, "jobs", "-o", "json")
		if code != 0 {
			t.Fatalf("corral jobs -o json: exit %d, stderr %s", code, stderr)
		}
		var list api.JobList
		if err := json.Unmarshal([]byte(stdout), &list); err != nil {
			t.Fatalf("corral jobs -o json printed %q: %v", truncate(stdout, 300), err)
		}
		found := false
		for _, x := range list.Jobs {
			found = found || x.ID == j.ID
		}
		if !found || len(list.Jobs) != len(s.jobs()) {
			t.Errorf("corral jobs -o json: %d jobs, found %s: %v", len(list.Jobs), j.ID, found)
		}

		// The table shows ids by a unique prefix of 12 or more characters.
		stdout, stderr, code = runCLI(t, env, "jobs")
		if code != 0 || !strings.Contains(stdout, j.ID[:12]) {
			t.Errorf("corral jobs (table): exit %d, stdout %q, stderr %q", code, truncate(stdout, 300), stderr)
		}
		stdout, _, code = runCLI(t, env, "logs", j.ID)
		if code != 0 || strings.TrimSpace(stdout) != "cli-"+j.ID {
			t.Errorf("corral logs: exit %d, %q", code, stdout)
		}

		dead := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		_, stderr, code = runCLI(t, []string{"CORRAL_SERVER=" + dead}, "jobs")
		if code == 0 {
			t.Errorf("corral jobs against no server exited 0")
		}
		if !strings.Contains(stderr, "cannot reach") || !strings.Contains(stderr, dead) {
			t.Errorf("corral jobs against no server: want a message saying %s cannot be reached, got %q", dead, stderr)
		}
		if strings.Contains(stderr, "goroutine") || strings.Count(stderr, "\n") > 3 {
			t.Errorf("the unreachable message should be short, got %q", stderr)
		}
	})
}

// requireKeys checks that an object has the documented keys (null allowed).
func requireKeys(t *testing.T, what string, obj map[string]json.RawMessage, keys ...string) {
	t.Helper()
	var missing []string
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		have := make([]string, 0, len(obj))
		for k := range obj {
			have = append(have, k)
		}
		slices.Sort(have)
		t.Errorf("%s lacks the documented keys %v (has %v)", what, missing, have)
	}
}

// readAllWithin reads r to EOF, failing after d.
func readAllWithin(r *bufio.Reader, d time.Duration) (string, error) {
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		ch <- result{string(b), err}
	}()
	select {
	case res := <-ch:
		return res.s, res.err
	case <-time.After(d):
		return "", fmt.Errorf("no end of stream within %v", d)
	}
}
