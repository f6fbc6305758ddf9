package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// These tests attack `corral server` as a hostile agent would: a process
// that holds the join token (any node's agent does) and speaks the agent
// protocol over HTTP with whatever it likes.

// hostileAgent speaks the agent protocol by hand.
type hostileAgent struct {
	s       *server
	node    string
	session string
}

// call posts body to an agent route with the join token (and the session,
// once registered).
func (h *hostileAgent) call(path string, body any) response {
	h.s.t.Helper()
	headers := map[string]string{"Authorization": "Bearer " + joinToken}
	if h.session != "" {
		headers[api.AgentSessionHeader] = h.session
	}
	return h.s.do("POST", path, body, headers)
}

// register registers the node with n GPUs of 80 GiB as agent agentID and
// requires 200.
func (h *hostileAgent) register(agentID string, n int) {
	h.s.t.Helper()
	gpus := []map[string]any{}
	for i := range n {
		gpus = append(gpus, map[string]any{"index": i, "uuid": fmt.Sprintf("GPU-%s-%d", h.node, i), "model": "H100", "memory_mib": 81920})
	}
	r := h.call("/agent/v1/register", map[string]any{"node_id": h.node, "agent_id": agentID, "hostname": h.node, "gpus": gpus, "tasks": []any{}})
	var cfg api.AgentConfig
	if r.Status != 200 || json.Unmarshal(r.Body, &cfg) != nil || cfg.Session == "" {
		h.s.t.Fatalf("register %s: %s", h.node, r)
	}
	h.session = cfg.Session
}

// sync reports and returns the work, requiring 200.
func (h *hostileAgent) sync(report map[string]any) api.AgentWork {
	h.s.t.Helper()
	report["node_id"] = h.node
	if report["tasks"] == nil {
		report["tasks"] = []any{}
	}
	r := h.call("/agent/v1/sync", report)
	var w api.AgentWork
	if r.Status != 200 || json.Unmarshal(r.Body, &w) != nil {
		h.s.t.Fatalf("sync %s: %s", h.node, r)
	}
	return w
}

// wantError requires an error answer with the status, code and field.
func wantError(t *testing.T, r response, status int, code, field string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want HTTP %d %s naming %q, got %s", status, code, field, r)
	}
	if e := errorBody(t, r); e.Code != code || e.Field != field {
		t.Fatalf("want %s naming %q, got %+v", code, field, e)
	}
}

// A holder of the join token tries to take over a live node: with no
// agent id (422 agent_id), with its own agent id (409 node_in_use). The
// real agent keeps the node, and its job runs on and completes.
func TestSecurityAgentTakeOverRefused(t *testing.T) {
	s := startCluster(t)
	startAgent(t, s, "n1", 2)
	dir := t.TempDir()
	j := s.submit(map[string]any{"command": "echo started; " + holdCmd(dir, "job") + "; echo finished", "gpu_count": 1})
	s.waitState(j.ID, api.StateRunning, 20*time.Second)

	evil := &hostileAgent{s: s, node: "n1"}
	noID := map[string]any{"node_id": "n1", "hostname": "evil", "gpus": []any{}, "tasks": []any{}}
	wantError(t, evil.call("/agent/v1/register", noID), 422, "invalid_field", "agent_id")
	noID["agent_id"] = "evil-agent-0123456789"
	wantError(t, evil.call("/agent/v1/register", noID), 409, "node_in_use", "node_id")
	// Without the holder's session it can neither report for the node nor
	// be handed the node's tasks.
	r := evil.call("/agent/v1/sync", map[string]any{"node_id": "n1", "tasks": []any{}})
	if r.Status < 400 || strings.Contains(string(r.Body), j.ID) {
		t.Fatalf("a sync for n1 without its session: %s", r)
	}

	// Past a TTL: the real agent would have been locked out by now.
	// Nothing to await: what is checked is that nothing happens within
	// the node TTL, by which the real agent would have been locked out.
	time.Sleep(clusterTTL + time.Second)
	if got := s.job(j.ID); got.State != api.StateRunning || got.RetryCount != 0 {
		t.Fatalf("the job after a refused take-over: %s (%s), retry %d; want running, attempt 0", got.State, got.Reason, got.RetryCount)
	}
	if n := s.waitNode("n1", "up", time.Second); n.Hostname == "evil" {
		t.Fatalf("the node's hostname was taken: %+v", n)
	}
	release(t, dir, "job")
	got := s.waitState(j.ID, api.StateCompleted, 20*time.Second)
	if got.RetryCount != 0 || !strings.Contains(s.logs(j.ID), "finished") {
		t.Fatalf("job %+v, log %q; want it completed in its first attempt", got, s.logs(j.ID))
	}
}

// The node of `corral up`'s own in-process agent cannot be taken over
// either: that agent names itself with an agent id too.
func TestSecurityAgentTakeOverOfUpNodeRefused(t *testing.T) {
	s := startServer(t)
	tok, err := os.ReadFile(filepath.Join(s.DataDir, "join.token"))
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(tok))}
	reg := map[string]any{"node_id": "e2e-node", "hostname": "evil", "gpus": []any{}, "tasks": []any{}}
	wantError(t, s.do("POST", "/agent/v1/register", reg, headers), 422, "invalid_field", "agent_id")
	reg["agent_id"] = "evil-agent-0123456789"
	wantError(t, s.do("POST", "/agent/v1/register", reg, headers), 409, "node_in_use", "node_id")
	j := s.submit(map[string]any{"command": "echo ok", "gpu_count": 1})
	if got := s.waitTerminal(j.ID, 20*time.Second); got.State != api.StateCompleted {
		t.Fatalf("a job on the local node after refused take-overs: %s (%s)", got.State, got.Reason)
	}
}

// Registrations with absurd numbers answer 422 naming the field, and the
// node is not registered.
func TestSecurityAgentRegistrationBounds(t *testing.T) {
	s := startCluster(t)
	gpu := func(i int, mib any) map[string]any {
		return map[string]any{"index": i, "uuid": fmt.Sprintf("GPU-%d", i), "model": "H100", "memory_mib": mib}
	}
	var sixtyFive []map[string]any
	for i := range 65 {
		sixtyFive = append(sixtyFive, gpu(i, 81920))
	}
	cases := map[string]struct {
		gpus  []map[string]any
		field string
	}{
		"2^62 MiB on GPU 3": {[]map[string]any{gpu(0, 1), gpu(1, 1), gpu(2, 1), gpu(3, int64(math.MaxInt64/2+1))}, "gpus[3].memory_mib"},
		"negative memory":   {[]map[string]any{gpu(0, -1)}, "gpus[0].memory_mib"},
		"negative index":    {[]map[string]any{gpu(-1, 1)}, "gpus[0].index"},
		"duplicate index":   {[]map[string]any{gpu(0, 1), gpu(0, 1)}, "gpus[1].index"},
		"65 GPUs":           {sixtyFive, "gpus"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			evil := &hostileAgent{s: s.on(t), node: "bad"}
			r := evil.call("/agent/v1/register", map[string]any{"node_id": "bad", "agent_id": "evil-agent-0123456789", "hostname": "bad", "gpus": tc.gpus, "tasks": []any{}})
			wantError(t, r, 422, "invalid_field", tc.field)
		})
	}
	if c := s.cluster(); len(c.Nodes) != 0 || c.TotalGPUs != 0 {
		t.Fatalf("refused registrations left nodes: %+v", c)
	}
}

// A sync with absurd telemetry is answered (a broken sensor must not cost a
// node its jobs), but none of it shows in /cluster/gpu-status.
func TestSecurityAgentAbsurdTelemetry(t *testing.T) {
	s := startCluster(t)
	evil := &hostileAgent{s: s, node: "hot"}
	evil.register("hot-agent-0123456789", 2)
	evil.sync(map[string]any{"telemetry": []map[string]any{
		{"index": 0, "utilization": -50, "memory_used_mib": int64(1) << 62, "temperature": 10000},
		{"index": 1, "utilization": 42, "memory_used_mib": 1024, "temperature": 55},
		{"index": 5, "utilization": 100, "memory_used_mib": 1, "temperature": 40},
	}})
	var hot api.Node
	waitFor(t, 10*time.Second, func() string { return fmt.Sprintf("the good reading of GPU 1 to show (node %+v)", hot) }, func() bool {
		for _, n := range s.cluster().Nodes {
			if n.NodeID == "hot" {
				hot = n
			}
		}
		return len(hot.GPUs) == 2 && hot.GPUs[1].Utilization == 42
	})
	if g := hot.GPUs[0]; g.Utilization != 0 || g.MemoryUsed != 0 || g.Temperature != nil {
		t.Fatalf("GPU 0 shows absurd telemetry: %+v", g)
	}
	var hist struct {
		Samples []struct{ Readings []api.GPUReading }
	}
	s.mustJSON("GET", "/cluster/nodes/hot/history", nil, 200, &hist)
	for _, sm := range hist.Samples {
		for _, r := range sm.Readings {
			if r.Index != 1 {
				t.Fatalf("the node's history keeps absurd telemetry: %+v", sm)
			}
		}
	}
}

// An agent whose clock is five hours off runs a job: the job's started_at
// and finished_at, and the queue's wait statistics, are within seconds of
// the server's clock. So are they when the agent sends no clock at all and
// claims times five hours off.
func TestSecurityAgentSkewedClock(t *testing.T) {
	for _, tc := range []struct {
		name     string
		skew     time.Duration
		sendsNow bool
	}{
		{"clock five hours ahead", 5 * time.Hour, true},
		{"clock five hours behind", -5 * time.Hour, true},
		{"no clock, times five hours behind", -5 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startCluster(t).on(t)
			agent := &hostileAgent{s: s, node: "skewed"}
			agent.register("skewed-agent-0123456789", 1)
			j := s.submit(map[string]any{"command": "true", "gpu_count": 1})
			var spec api.TaskSpec
			waitFor(t, 10*time.Second, func() string { return "the job to be handed to the node" }, func() bool {
				w := agent.sync(map[string]any{})
				for _, ts := range w.Tasks {
					if ts.JobID == j.ID {
						spec = ts
						return true
					}
				}
				return false
			})
			report := func(st api.TaskStatus) {
				agentNow := time.Now().Add(tc.skew)
				m := map[string]any{"tasks": []api.TaskStatus{st}}
				if tc.sendsNow {
					m["now"] = agentNow
				}
				agent.sync(m)
			}
			started := time.Now().Add(tc.skew)
			report(api.TaskStatus{JobID: spec.JobID, Attempt: spec.Attempt, Rank: spec.Rank, State: api.TaskRunning, PID: 4242, StartedAt: &started})
			s.waitState(j.ID, api.StateRunning, 10*time.Second)
			finished := time.Now().Add(tc.skew)
			report(api.TaskStatus{JobID: spec.JobID, Attempt: spec.Attempt, Rank: spec.Rank, State: api.TaskExited, StartedAt: &started, FinishedAt: &finished})
			got := s.waitState(j.ID, api.StateCompleted, 10*time.Second)
			now := time.Now()
			for what, at := range map[string]*time.Time{"started_at": got.StartedAt, "finished_at": got.FinishedAt} {
				if at == nil || at.Before(got.SubmittedAt) || at.After(now) || now.Sub(*at) > 30*time.Second {
					t.Errorf("%s = %v; want between submission (%v) and now (%v)", what, at, got.SubmittedAt, now)
				}
			}
			if got.StartedAt != nil && got.FinishedAt != nil && got.FinishedAt.Before(*got.StartedAt) {
				t.Errorf("finished_at %v before started_at %v", got.FinishedAt, got.StartedAt)
			}
			var st api.QueueStatistics
			s.mustJSON("GET", "/queue/statistics", nil, 200, &st)
			if st.AverageWaitTime < 0 || st.AverageWaitTime > 30 || st.WaitTimeP99 < 0 || st.WaitTimeP99 > 30 {
				t.Errorf("wait statistics %+v; want waits of seconds", st)
			}
		})
	}
}

// A job reads none of the credentials its agent was started with: not
// the join token of a `corral agent` (it could register nodes and be
// handed other users' jobs), not the admin token of `corral up`.
func TestSecurityJobsSeeNoAgentCredentials(t *testing.T) {
	for name, start := range map[string]func(t *testing.T) *server{
		"corral agent": func(t *testing.T) *server {
			s := startCluster(t)
			startAgent(t, s, "n1", 1)
			return s
		},
		"corral up": startServer,
	} {
		t.Run(name, func(t *testing.T) {
			s := start(t).on(t)
			j := s.submit(map[string]any{"command": "env", "gpu_count": 1})
			if got := s.waitTerminal(j.ID, 20*time.Second); got.State != api.StateCompleted {
				t.Fatalf("job %s (%s)", got.State, got.Reason)
			}
			out := s.logs(j.ID)
			if !strings.Contains(out, "CORRAL_JOB_ID="+j.ID) {
				t.Fatalf("the job's environment was not logged: %q", truncate(out, 2000))
			}
			for what, secret := range map[string]string{"join token": joinToken, "admin token": adminToken} {
				if strings.Contains(out, secret) {
					t.Errorf("the job's environment holds the %s", what)
				}
			}
		})
	}
}
