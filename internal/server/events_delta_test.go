package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/web"
)

// The builders of the delta tests: a queue row, an active job, a node.
func qrow(id string, pos int, queued time.Time) api.QueuedJob {
	return api.QueuedJob{ID: id, Name: "job-" + id, User: "alice", Project: "nlp", Priority: 2, RequestedGPUs: 1, Nodes: 1, QueuedAt: queued, QueuePosition: pos}
}

func activeJob(id, node string, gpu int) api.Job {
	return api.Job{ID: id, Name: "job-" + id, User: "bob", Project: "vision", Command: "train", State: api.StateRunning, Priority: 2, GPUCount: 1, Nodes: 1,
		Allocation: []api.Allocation{{NodeID: node, GPUID: gpu, GPUUUID: fmt.Sprintf("GPU-%s-%d", node, gpu), MemoryGB: 80}}}
}

func gpuNode(id string, holders ...string) api.Node {
	n := api.Node{NodeID: id, Hostname: id, GPUCount: 2, GPUType: "H100", State: "up", Containment: "cgroup-v2", Pool: "agents"}
	for i := range 2 {
		g := api.GPU{ID: i, UUID: fmt.Sprintf("GPU-%s-%d", id, i), Model: "H100", MemoryTotal: 81920}
		if i < len(holders) && holders[i] != "" {
			g.AllocatedTo = &holders[i]
		}
		n.GPUs = append(n.GPUs, g)
	}
	return n
}

// cloneUpdate is a deep copy of u, through JSON as a client receives it.
func cloneUpdate(t *testing.T, u api.DashboardUpdate) api.DashboardUpdate {
	t.Helper()
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var c api.DashboardUpdate
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// baseUpdate: two nodes, two running jobs, five queued (two with an
// estimated start).
func baseUpdate(at time.Time) api.DashboardUpdate {
	u := api.DashboardUpdate{At: at, Status: api.OrchestratorStatus{Running: true, Policy: "fair_share", Cycles: 7, QueuedJobs: 5, RunningJobs: 2}}
	u.Cluster = api.ClusterStatus{TotalGPUs: 4, AvailableGPUs: 2, AllocatedGPUs: 2, Nodes: []api.Node{gpuNode("n1", "x", "y"), gpuNode("n2")}}
	u.Active = []api.Job{activeJob("x", "n1", 0), activeJob("y", "n1", 1)}
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		r := qrow(id, i+1, at.Add(-time.Duration(10*(i+1))*time.Minute))
		if i < 2 {
			start := at.Add(time.Duration(i+1) * time.Hour)
			r.EstimatedStartTime = &start
		}
		u.Queue.QueuedJobs = append(u.Queue.QueuedJobs, r)
	}
	u.Queue.Statistics = api.QueueStatistics{TotalQueued: 5, TotalRunning: 2}
	return u
}

// settle is what the server's full update holds at u.At: each row's waits
// as of then.
func settle(u *api.DashboardUpdate) {
	for i := range u.Queue.QueuedJobs {
		u.Queue.QueuedJobs[i].WaitClock(u.At)
	}
}

// renumber gives the rows their positions in order, as a new cycle does.
func renumber(u *api.DashboardUpdate) {
	for i := range u.Queue.QueuedJobs {
		u.Queue.QueuedJobs[i].QueuePosition = i + 1
	}
	u.Queue.Statistics.TotalQueued, u.Status.QueuedJobs = len(u.Queue.QueuedJobs), len(u.Queue.QueuedJobs)
}

func removeRow(u *api.DashboardUpdate, id string) api.QueuedJob {
	i := slices.IndexFunc(u.Queue.QueuedJobs, func(r api.QueuedJob) bool { return r.ID == id })
	r := u.Queue.QueuedJobs[i]
	u.Queue.QueuedJobs = slices.Delete(u.Queue.QueuedJobs, i, i+1)
	return r
}

// deltaSize counts what a delta carries in its lists.
type deltaSize struct{ rows, removedRows, active, removedActive, nodes int }

func sizeOf(d api.DashboardDelta) deltaSize {
	return deltaSize{len(d.Queue.QueuedJobs.Upsert), len(d.Queue.QueuedJobs.Remove), len(d.Active.Upsert), len(d.Active.Remove), len(d.Cluster.Nodes.Upsert)}
}

// TestDashboardDelta: applying the delta to the update before it rebuilds
// the update after it, field for field, and carries only what changed.
func TestDashboardDelta(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		change    func(u *api.DashboardUpdate)
		want      deltaSize
		order     bool // the rows' order is sent
		positions bool // the rows' positions are sent
	}{
		"nothing changes but the clock": {
			change: func(u *api.DashboardUpdate) {},
		},
		"a job is submitted at the end": {
			change: func(u *api.DashboardUpdate) {
				u.Queue.QueuedJobs = append(u.Queue.QueuedJobs, qrow("f", 6, u.At))
				renumber(u)
			},
			want: deltaSize{rows: 1},
		},
		"a job is submitted ahead of others": {
			change: func(u *api.DashboardUpdate) {
				u.Queue.QueuedJobs = slices.Insert(u.Queue.QueuedJobs, 1, qrow("f", 2, u.At))
				renumber(u)
			},
			want: deltaSize{rows: 1}, order: true, positions: true,
		},
		"a job leaves the head, the next one enters it": {
			change: func(u *api.DashboardUpdate) {
				removeRow(u, "a")
				u.Queue.QueuedJobs = append(u.Queue.QueuedJobs, qrow("g", 5, u.At.Add(-time.Hour)))
				renumber(u)
				u.Queue.NextCursor = "5"
			},
			want: deltaSize{rows: 1, removedRows: 1}, positions: true,
		},
		"a job's reason changes": {
			change: func(u *api.DashboardUpdate) {
				u.Queue.QueuedJobs[2].PendingReason, u.Queue.QueuedJobs[2].PendingMessage = "resources", "waits for 1 GPU"
			},
			want: deltaSize{rows: 1},
		},
		"a job starts": {
			change: func(u *api.DashboardUpdate) {
				r := removeRow(u, "b")
				renumber(u)
				j := activeJob(r.ID, "n2", 0)
				u.Active = append(u.Active, j)
				u.Cluster.Nodes[1] = gpuNode("n2", "b")
				u.Cluster.AvailableGPUs, u.Cluster.AllocatedGPUs = 1, 3
			},
			want: deltaSize{removedRows: 1, active: 1, nodes: 1}, positions: true,
		},
		"telemetry changes on a node": {
			change: func(u *api.DashboardUpdate) {
				temp := 71
				g := &u.Cluster.Nodes[0].GPUs[1]
				g.Utilization, g.MemoryUsed, g.Temperature = 97, 40000, &temp
			},
			want: deltaSize{nodes: 1},
		},
		"a job ends": {
			change: func(u *api.DashboardUpdate) {
				u.Active = u.Active[1:]
				u.Cluster.Nodes[0] = gpuNode("n1", "", "y")
				u.Cluster.AvailableGPUs, u.Cluster.AllocatedGPUs = 3, 1
				u.Queue.Statistics.CompletedLastHour++
			},
			want: deltaSize{removedActive: 1, nodes: 1},
		},
		"a running job changes": {
			change: func(u *api.DashboardUpdate) { u.Active[1].Idle = true },
			want:   deltaSize{active: 1},
		},
		"a node joins between others": {
			change: func(u *api.DashboardUpdate) {
				u.Cluster.Nodes = slices.Insert(u.Cluster.Nodes, 1, gpuNode("n1b"))
				u.Cluster.TotalGPUs, u.Cluster.AvailableGPUs = 6, 4
			},
			want: deltaSize{nodes: 1},
		},
		"the queue empties": {
			change: func(u *api.DashboardUpdate) { u.Queue.QueuedJobs = []api.QueuedJob{}; renumber(u) },
			want:   deltaSize{removedRows: 5},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := baseUpdate(t0)
			settle(&before)
			view := newStreamView()
			if _, err := view.delta(before); err != nil {
				t.Fatal(err)
			}
			after := cloneUpdate(t, before)
			after.At = t0.Add(5 * time.Second)
			after.Status.Cycles++
			tc.change(&after)
			settle(&after)
			d, err := view.delta(cloneUpdate(t, after))
			if err != nil {
				t.Fatal(err)
			}
			got := cloneUpdate(t, before)
			got.Apply(d)
			if g, w := mustJSON(t, got), mustJSON(t, after); g != w {
				t.Fatalf("applied:\n%s\nwant:\n%s", g, w)
			}
			if s := sizeOf(d); s != tc.want {
				t.Errorf("the delta carries %+v, want %+v", s, tc.want)
			}
			if (d.Queue.QueuedJobs.Order != nil) != tc.order || (d.Queue.Positions != nil) != tc.positions {
				t.Errorf("order %v, positions %v; want them sent: %v, %v", d.Queue.QueuedJobs.Order, d.Queue.Positions, tc.order, tc.positions)
			}
		})
	}
}

// TestDashboardDeltaSequence: one stream's deltas, one after the other,
// keep rebuilding the update of their moment.
func TestDashboardDeltaSequence(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	u := baseUpdate(t0)
	settle(&u)
	view := newStreamView()
	if _, err := view.delta(u); err != nil {
		t.Fatal(err)
	}
	client := cloneUpdate(t, u)
	steps := []func(u *api.DashboardUpdate){
		func(u *api.DashboardUpdate) { // submitted, and placed second
			u.Queue.QueuedJobs = slices.Insert(u.Queue.QueuedJobs, 1, qrow("f", 0, u.At))
			renumber(u)
		},
		func(u *api.DashboardUpdate) {}, // nothing
		func(u *api.DashboardUpdate) { // a starts on n2
			removeRow(u, "a")
			renumber(u)
			u.Active = append(u.Active, activeJob("a", "n2", 0))
			u.Cluster.Nodes[1] = gpuNode("n2", "a")
		},
		func(u *api.DashboardUpdate) { u.Cluster.Nodes[1].GPUs[0].Utilization = 88 }, // telemetry
		func(u *api.DashboardUpdate) { // x ends
			u.Active = slices.DeleteFunc(u.Active, func(j api.Job) bool { return j.ID == "x" })
			u.Cluster.Nodes[0] = gpuNode("n1", "", "y")
		},
		func(u *api.DashboardUpdate) { slices.Reverse(u.Active) }, // the active jobs reordered
		func(u *api.DashboardUpdate) { // the head is reordered
			slices.Reverse(u.Queue.QueuedJobs)
			renumber(u)
		},
	}
	for i, step := range steps {
		next := cloneUpdate(t, u)
		next.At = u.At.Add(time.Duration(300+i*1000) * time.Millisecond)
		step(&next)
		settle(&next)
		d, err := view.delta(next)
		if err != nil {
			t.Fatal(err)
		}
		wire := mustJSON(t, d) // the client gets the delta through JSON
		var got api.DashboardDelta
		if err := json.Unmarshal([]byte(wire), &got); err != nil {
			t.Fatal(err)
		}
		client.Apply(got)
		if g, w := mustJSON(t, client), mustJSON(t, next); g != w {
			t.Fatalf("step %d: applied:\n%s\nwant:\n%s", i, g, w)
		}
		u = next
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventReader reads a GET /events stream as the dashboard does: it keeps
// the latest update, applying each delta to it.
type eventReader struct {
	t     *testing.T
	sc    *bufio.Scanner
	state api.DashboardUpdate
}

func readEvents(t *testing.T, body io.Reader) *eventReader {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	return &eventReader{t: t, sc: sc}
}

// next reads one `update` or `delta` event into r.state and returns its
// name and the size of its data.
func (r *eventReader) next() (event string, size int) {
	r.t.Helper()
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && (event == "update" || event == "delta"):
			data := []byte(strings.TrimPrefix(line, "data: "))
			if event == "update" {
				r.state = api.DashboardUpdate{}
				if err := json.Unmarshal(data, &r.state); err != nil {
					r.t.Fatalf("update: %v", err)
				}
				return event, len(data)
			}
			if r.state.At.IsZero() {
				r.t.Fatal("a delta came before any update")
			}
			var d api.DashboardDelta
			if err := json.Unmarshal(data, &d); err != nil {
				r.t.Fatalf("delta: %v", err)
			}
			r.state.Apply(d)
			return event, len(data)
		}
	}
	r.t.Fatalf("the stream ended: %v", r.sc.Err())
	return "", 0
}

// TestEventsDeltas: after the first update the stream sends deltas; one
// changed job among many makes a delta a small part of the update, and
// the deltas applied give what a full update holds.
func TestEventsDeltas(t *testing.T) {
	ts := busyServer(t)
	for i := range 60 {
		ts.submit(fmt.Sprintf(`{"name":"wide-%d","user":"erin","project":"nlp","command":"x","gpu_count":8,"env":{"K":"v%d"}}`, i, i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a fail-safe, not a measurement
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.url+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := readEvents(t, resp.Body)
	event, full := events.next()
	if event != "update" || len(events.state.Queue.QueuedJobs) != 61 {
		t.Fatalf("first event %q with %d queued rows, want an update with 61", event, len(events.state.Queue.QueuedJobs))
	}
	// One job changes: its priority.
	last := events.state.Queue.QueuedJobs[60]
	preq, _ := http.NewRequest("PATCH", ts.url+"/queue/"+last.ID+"/priority", strings.NewReader(`{"priority":"low"}`))
	presp, err := http.DefaultClient.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	presp.Body.Close()
	if presp.StatusCode != 200 {
		t.Fatalf("PATCH priority: %d", presp.StatusCode)
	}
	for {
		event, size := events.next()
		if event != "delta" {
			t.Fatalf("event %q after the first, want delta", event)
		}
		i := slices.IndexFunc(events.state.Queue.QueuedJobs, func(r api.QueuedJob) bool { return r.ID == last.ID })
		if i < 0 || events.state.Queue.QueuedJobs[i].Priority != api.PriorityLow {
			continue
		}
		t.Logf("the full update: %d bytes; the delta of one changed job: %d bytes", full, size)
		if size*5 > full {
			t.Errorf("the delta of one changed job is %d bytes, the full update %d", size, full)
		}
		break
	}
	// What the deltas rebuilt is what a full update holds now, but for
	// the waits, which move with the clock.
	want := ts.o.Dashboard(ctx)
	got := events.state
	for _, u := range []*api.DashboardUpdate{&want, &got} {
		u.At, u.Status.LastCycleAt, u.Status.LastCycleMS, u.Status.Cycles = time.Time{}, nil, 0, 0
		u.Queue.Statistics = api.QueueStatistics{}
		for i := range u.Queue.QueuedJobs {
			u.Queue.QueuedJobs[i].WaitClock(time.Time{})
		}
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("rebuilt:\n%s\nwant:\n%s", g, w)
	}
}

// TestDashboardDeltaInJS: the dashboard's applyDelta (web/static/api.js)
// rebuilds the same pictures as api.DashboardUpdate.Apply from the same
// deltas. It runs the script under Node.js when there is one (the browser
// tests in e2e cover it otherwise).
func TestDashboardDeltaInJS(t *testing.T) {
	node, err := osexec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	u := baseUpdate(t0)
	settle(&u)
	view := newStreamView()
	if _, err := view.delta(u); err != nil {
		t.Fatal(err)
	}
	steps := []func(u *api.DashboardUpdate){
		func(u *api.DashboardUpdate) {
			u.Queue.QueuedJobs = slices.Insert(u.Queue.QueuedJobs, 1, qrow("f", 0, u.At))
			renumber(u)
			u.Queue.NextCursor = "6"
		},
		func(u *api.DashboardUpdate) {},
		func(u *api.DashboardUpdate) {
			removeRow(u, "a")
			renumber(u)
			u.Active = append(u.Active, activeJob("a", "n2", 0))
			u.Cluster.Nodes[1] = gpuNode("n2", "a")
			u.Queue.NextCursor = ""
		},
		func(u *api.DashboardUpdate) { u.Cluster.Nodes[1].GPUs[0].Utilization = 88 },
		func(u *api.DashboardUpdate) {
			u.Active = u.Active[1:]
			u.Cluster.Nodes = slices.Insert(u.Cluster.Nodes, 1, gpuNode("n1b"))
		},
		func(u *api.DashboardUpdate) { slices.Reverse(u.Queue.QueuedJobs); renumber(u) },
	}
	var deltas, want []string
	for i, step := range steps {
		next := cloneUpdate(t, u)
		next.At = u.At.Add(time.Duration(300+i*1000) * time.Millisecond)
		step(&next)
		settle(&next)
		d, err := view.delta(next)
		if err != nil {
			t.Fatal(err)
		}
		deltas, want = append(deltas, mustJSON(t, d)), append(want, mustJSON(t, next))
		u = next
	}
	src, err := fs.ReadFile(web.Static, "static/api.js")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := baseUpdate(t0)
	settle(&b)
	first := mustJSON(t, b)
	driver := `import { applyDelta } from './api.mjs';
import { readFileSync } from 'node:fs';
const [first, deltas] = JSON.parse(readFileSync(process.argv[2], 'utf8'));
let cur = first;
for (const d of deltas) {
  cur = applyDelta(cur, d);
  console.log(JSON.stringify(cur));
}
`
	input := "[" + first + ",[" + strings.Join(deltas, ",") + "]]"
	for name, body := range map[string]string{"api.mjs": string(src), "driver.mjs": driver, "input.json": input} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := osexec.Command(node, filepath.Join(dir, "driver.mjs"), filepath.Join(dir, "input.json")).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("node printed %d pictures, want %d:\n%s", len(lines), len(want), out)
	}
	for i, line := range lines {
		// Through Go's types, so that both read alike: JavaScript's
		// numbers print differently, and its times have milliseconds.
		var got api.DashboardUpdate
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("step %d: %v\n%s", i, err, line)
		}
		var w api.DashboardUpdate
		if err := json.Unmarshal([]byte(want[i]), &w); err != nil {
			t.Fatal(err)
		}
		for _, u := range []*api.DashboardUpdate{&got, &w} {
			for j := range u.Queue.QueuedJobs {
				r := &u.Queue.QueuedJobs[j]
				r.WaitedSeconds = math.Round(r.WaitedSeconds*1000) / 1000
				if r.EstimatedWaitTime != nil {
					e := math.Round(*r.EstimatedWaitTime*1000) / 1000
					r.EstimatedWaitTime = &e
				}
			}
		}
		if g, ww := mustJSON(t, got), mustJSON(t, w); g != ww {
			t.Errorf("step %d: applyDelta gives\n%s\nwant\n%s", i, g, ww)
		}
	}
}
