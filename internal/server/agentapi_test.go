package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/agents"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// These tests speak the agent protocol over HTTP as a hostile agent would:
// it holds the join token, and nothing else.

// poolBook hands the pool's node news to the orchestrator once it exists.
type poolBook struct{ o **orchestrator.Orchestrator }

func (b poolBook) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	return (*b.o).RegisterNode(ctx, reg, addr)
}

func (b poolBook) NodeSeen(id string, r []api.GPUReading, f []api.ForeignProcess, at time.Time) {
	(*b.o).NodeSeen(id, r, f, at)
}

// newAgentServer serves the agent protocol with a real agent pool over the
// test orchestrator.
func newAgentServer(t *testing.T) (*httptest.Server, *orchestrator.Orchestrator) {
	t.Helper()
	var o *orchestrator.Orchestrator
	pool := agents.New(agents.Config{Sink: func(u exec.Update) { o.Sink(u) }, Book: poolBook{&o}, Logger: slog.New(slog.DiscardHandler)})
	h, o, _ := newHandler(t, pool, slog.New(slog.DiscardHandler), WithAgents(pool, testJoinToken))
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts, o
}

// agentCall posts body to an agent route with the join token and, when
// set, an agent session.
func agentCall(t *testing.T, ts *httptest.Server, path, session, body string) (int, api.ErrorDetail, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testJoinToken)
	if session != "" {
		req.Header.Set(api.AgentSessionHeader, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb api.ErrorBody
	if resp.StatusCode >= 300 {
		json.Unmarshal(b, &eb)
	}
	return resp.StatusCode, eb.Error, b
}

const holderReg = `{"node_id":"n2","agent_id":"holder-0123456789abcdef","hostname":"n2","tasks":[],
	"gpus":[{"index":0,"uuid":"GPU-a","model":"H100","memory_mib":81920,"nvlink_peers":[1]},{"index":1,"uuid":"GPU-b","model":"H100","memory_mib":81920,"nvlink_peers":[0]}]}`

// register registers n2 as its holder and returns the session.
func registerHolder(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	status, e, b := agentCall(t, ts, "/agent/v1/register", "", holderReg)
	var cfg api.AgentConfig
	if status != 200 || json.Unmarshal(b, &cfg) != nil || cfg.Session == "" {
		t.Fatalf("holder's registration: %d %+v %s", status, e, b)
	}
	return cfg.Session
}

// The take-over of a node, over HTTP: a registration of a live node
// without an agent id is 422 agent_id, with another agent id 409
// node_in_use; neither gets a session, and the holder's session still
// works.
func TestAgentTakeOverRefused(t *testing.T) {
	ts, _ := newAgentServer(t)
	session := registerHolder(t, ts)
	takeOvers := map[string]struct {
		body        string
		status      int
		code, field string
	}{
		"no agent id":      {`{"node_id":"n2","hostname":"evil","gpus":[],"tasks":[]}`, 422, "invalid_field", "agent_id"},
		"empty agent id":   {`{"node_id":"n2","agent_id":"","hostname":"evil","gpus":[],"tasks":[]}`, 422, "invalid_field", "agent_id"},
		"another agent id": {`{"node_id":"n2","agent_id":"evil-0123456789abcdef","hostname":"evil","gpus":[],"tasks":[]}`, 409, "node_in_use", "node_id"},
	}
	for name, tc := range takeOvers {
		t.Run(name, func(t *testing.T) {
			status, e, b := agentCall(t, ts, "/agent/v1/register", "", tc.body)
			if status != tc.status || e.Code != tc.code || e.Field != tc.field || strings.Contains(string(b), "session") {
				t.Fatalf("take-over: %d %s; want %d %s naming %q", status, b, tc.status, tc.code, tc.field)
			}
			if status, e, _ := agentCall(t, ts, "/agent/v1/sync", session, `{"node_id":"n2","tasks":[]}`); status != 200 {
				t.Fatalf("the holder's sync after a refused take-over: %d %+v", status, e)
			}
		})
	}
}

func TestAgentRegistrationOutOfBounds(t *testing.T) {
	ts, _ := newAgentServer(t)
	reg := func(gpus string) string {
		return `{"node_id":"n3","agent_id":"agent-n3-0123456789","hostname":"n3","tasks":[],"gpus":[` + gpus + `]}`
	}
	cases := map[string]struct {
		body   string
		status int
		field  string
	}{
		"2^62 MiB":          {reg(`{"index":0,"uuid":"A","memory_mib":81920},{"index":1,"uuid":"B","memory_mib":4611686018427387904}`), 422, "gpus[1].memory_mib"},
		"memory past int64": {reg(`{"index":0,"uuid":"A","memory_mib":1e400}`), 422, "gpus.memory_mib"},
		"NaN memory":        {reg(`{"index":0,"uuid":"A","memory_mib":NaN}`), 400, ""},
		"negative index":    {reg(`{"index":-1,"uuid":"A","memory_mib":1}`), 422, "gpus[0].index"},
		"duplicate index":   {reg(`{"index":0,"uuid":"A","memory_mib":1},{"index":0,"uuid":"B","memory_mib":1}`), 422, "gpus[1].index"},
		"duplicate uuid":    {reg(`{"index":0,"uuid":"A","memory_mib":1},{"index":1,"uuid":"A","memory_mib":1}`), 422, "gpus[1].uuid"},
		"65 GPUs":           {reg(strings.TrimSuffix(strings.Repeat(`{"index":0,"memory_mib":1},`, 65), ",")), 422, "gpus"},
		"unknown MIG mode":  {reg(`{"index":0,"uuid":"A","memory_mib":1,"mig":{"mode":"on"}}`), 422, "gpus[0].mig"},
		"no MIG mode":       {reg(`{"index":0,"uuid":"A","memory_mib":1,"mig":{"devices":[]}}`), 422, "gpus[0].mig"},
		"65 MIG devices":    {reg(`{"index":0,"uuid":"A","memory_mib":1,"mig":{"mode":"enabled","devices":[` + strings.TrimSuffix(strings.Repeat(`{"uuid":"MIG-x"},`, 65), ",") + `]}}`), 422, "gpus[0].mig"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, e, b := agentCall(t, ts, "/agent/v1/register", "", tc.body)
			if status != tc.status || e.Field != tc.field {
				t.Fatalf("%d %s; want %d naming %q", status, b, tc.status, tc.field)
			}
		})
	}
	if status, _, b := agentCall(t, ts, "/agent/v1/sync", "", `{"node_id":"n3","tasks":[]}`); status != 409 {
		t.Fatalf("a node whose registrations were all refused: sync %d %s; want 409 unknown_node", status, b)
	}
}

// Absurd readings in a sync are dropped, the good ones kept, and the sync
// answered: GET /cluster/gpu-status shows no negative utilisation, no
// 10,000 °C, no more memory used than the GPU has.
func TestAgentAbsurdTelemetryNotShown(t *testing.T) {
	ts, o := newAgentServer(t)
	session := registerHolder(t, ts)
	status, e, _ := agentCall(t, ts, "/agent/v1/sync", session, `{"node_id":"n2","tasks":[],"telemetry":[
		{"index":0,"utilization":-50,"memory_used_mib":4611686018427387904,"temperature":10000},
		{"index":1,"utilization":42,"memory_used_mib":2048,"temperature":61},
		{"index":9,"utilization":99,"memory_used_mib":1,"temperature":50}]}`)
	if status != 200 {
		t.Fatalf("a sync with absurd readings: %d %+v; want 200 (readings dropped, not the node)", status, e)
	}
	var n2 api.Node
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, n := range o.Cluster(context.Background()).Nodes {
			if n.NodeID == "n2" {
				n2 = n
			}
		}
		if len(n2.GPUs) == 2 && n2.GPUs[1].Utilization == 42 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the good reading never showed: %+v", n2)
		}
		time.Sleep(10 * time.Millisecond) // poll interval: node news is applied by the loop
	}
	g0, g1 := n2.GPUs[0], n2.GPUs[1]
	if g0.Utilization != 0 || g0.MemoryUsed != 0 || g0.Temperature != nil {
		t.Errorf("GPU 0 shows the absurd reading: %+v", g0)
	}
	if g1.MemoryUsed != 2048 || g1.Temperature == nil || *g1.Temperature != 61 {
		t.Errorf("GPU 1 lost its good reading: %+v", g1)
	}
}

// A node may ship log output only for the ranks placed on it: not for
// another node's job, not even for an earlier attempt of it (which the
// orchestrator lets a late agent finish shipping).
func TestAgentLogsOnlyForItsOwnRanks(t *testing.T) {
	ts, o := newAgentServer(t)
	registerHolder(t, ts)
	status, e, b := agentCall(t, ts, "/agent/v1/register", "", `{"node_id":"n3","agent_id":"evil-0123456789abcdef","hostname":"n3","tasks":[],"gpus":[]}`)
	var cfg api.AgentConfig
	if status != 200 || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("register n3: %d %+v", status, e)
	}
	gpus := 1
	j, _, err := o.Submit(context.Background(), api.SubmitRequest{User: "alice", Command: "true", GPUCount: &gpus, MaxRetries: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, _ := o.Job(j.ID); len(got.Allocation) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job was never placed")
		}
		time.Sleep(10 * time.Millisecond) // poll interval: the loop places it
	}
	// Its attempt 0 is lost: it is requeued as attempt 1.
	o.Sink(exec.Update{JobID: j.ID, Attempt: 0, Kind: exec.Exited, ExitCode: -1, Lost: api.ReasonLost, Err: io.EOF})
	deadline = time.Now().Add(5 * time.Second)
	for {
		if got, _ := o.Job(j.ID); got.RetryCount == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job was never requeued")
		}
		time.Sleep(10 * time.Millisecond) // poll interval: the loop applies the update
	}
	for _, attempt := range []int{0, 1} {
		chunk := `{"node_id":"n3","job_id":"` + j.ID + `","attempt":` + strconv.Itoa(attempt) + `,"rank":0,"offset":0,"data":"ZXZpbAo="}`
		if status, _, b := agentCall(t, ts, "/agent/v1/logs", cfg.Session, chunk); status != 404 {
			t.Fatalf("n3 shipping output for attempt %d of a job it never ran: %d %s; want 404", attempt, status, b)
		}
	}
}

// A node's MIG state, as its agent registers it, is what GET
// /cluster/gpu-status shows of its GPUs.
func TestAgentMIGShown(t *testing.T) {
	ts, o := newAgentServer(t)
	status, e, b := agentCall(t, ts, "/agent/v1/register", "", `{"node_id":"n5","agent_id":"agent-n5-0123456789","hostname":"n5","tasks":[],"gpus":[
		{"index":0,"uuid":"GPU-a","model":"H100","memory_mib":81559,"mig":{"mode":"enabled","devices":[
			{"index":0,"uuid":"MIG-a0","profile":"3g.40gb","memory_total":40192,"gpu_instance":1,"compute_instance":0}]}},
		{"index":1,"uuid":"GPU-b","model":"H100","memory_mib":81559,"mig":{"mode":"disabled","pending_mode":"enabled"}},
		{"index":2,"uuid":"GPU-c","model":"H100","memory_mib":81559}]}`)
	if status != 200 {
		t.Fatalf("register: %d %+v %s", status, e, b)
	}
	want := []*api.MIG{
		{Mode: api.MIGEnabled, Devices: []api.MIGDevice{{Index: 0, UUID: "MIG-a0", Profile: "3g.40gb", MemoryTotal: 40192, GPUInstance: 1}}},
		{Mode: api.MIGDisabled, PendingMode: api.MIGEnabled},
		nil,
	}
	for _, n := range o.Cluster(context.Background()).Nodes {
		if n.NodeID != "n5" {
			continue
		}
		if len(n.GPUs) != len(want) {
			t.Fatalf("n5 has %d GPUs, want %d", len(n.GPUs), len(want))
		}
		for i, g := range n.GPUs {
			if !reflect.DeepEqual(g.MIG, want[i]) {
				t.Errorf("GPU %d: mig = %+v, want %+v", i, g.MIG, want[i])
			}
		}
		return
	}
	t.Fatal("n5 is not in the cluster")
}

// A replay of the holder's registration (its agent id, its clock's time
// of then) is 409 stale_registration naming now: it gets no session, the
// holder's session goes on, and nothing of the node changes. The holder
// registering again with its current time gets a new session (its node
// back, from whoever held its old one), as does a registration that
// carries no clock when the holder's carried none.
func TestAgentReplayedRegistrationRefused(t *testing.T) {
	ts, _ := newAgentServer(t)
	then := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	reg := func(node string, at time.Time) string {
		now := ""
		if !at.IsZero() {
			now = `"now":"` + at.Format(time.RFC3339Nano) + `",`
		}
		return `{"node_id":"` + node + `","agent_id":"holder-0123456789abcdef","hostname":"` + node + `",` + now + `"tasks":[],"gpus":[]}`
	}
	mustRegister := func(body string) string {
		t.Helper()
		status, e, b := agentCall(t, ts, "/agent/v1/register", "", body)
		var cfg api.AgentConfig
		if status != 200 || json.Unmarshal(b, &cfg) != nil || cfg.Session == "" {
			t.Fatalf("registration %s: %d %+v %s", body, status, e, b)
		}
		return cfg.Session
	}
	holder := mustRegister(reg("n7", then))
	for name, at := range map[string]time.Time{"the same registration": then, "an older one": then.Add(-time.Minute), "one without a clock": {}} {
		t.Run(name, func(t *testing.T) {
			status, e, b := agentCall(t, ts, "/agent/v1/register", "", reg("n7", at))
			if status != 409 || e.Code != "stale_registration" || e.Field != "now" || strings.Contains(string(b), `"session"`) {
				t.Fatalf("replay: %d %s; want 409 stale_registration naming now", status, b)
			}
			if status, e, _ := agentCall(t, ts, "/agent/v1/sync", holder, `{"node_id":"n7","tasks":[]}`); status != 200 {
				t.Fatalf("the holder's sync after a refused replay: %d %+v", status, e)
			}
		})
	}
	again := mustRegister(reg("n7", then.Add(time.Second)))
	if status, e, _ := agentCall(t, ts, "/agent/v1/sync", holder, `{"node_id":"n7","tasks":[]}`); status != 403 || e.Code != "wrong_node" {
		t.Fatalf("the old session after the holder registered again: %d %+v; want 403 wrong_node", status, e)
	}
	if status, e, _ := agentCall(t, ts, "/agent/v1/sync", again, `{"node_id":"n7","tasks":[]}`); status != 200 {
		t.Fatalf("the new session: %d %+v", status, e)
	}
	mustRegister(reg("n8", time.Time{}))
	mustRegister(reg("n8", time.Time{})) // no clock to tell a replay by: as before
}
