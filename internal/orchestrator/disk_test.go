package orchestrator

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A node whose agent says its log disk is full takes no new job, and the
// waiting job says why; once the agent reports room, the job starts.
func TestNodeDiskFull(t *testing.T) {
	h := start(t, "", nil)
	h.o.NodeDisk("n1", "its log disk (/d) has 1.0% free, under --min-free-disk 5%")
	deadline := time.Now().Add(5 * time.Second)
	for h.o.Cluster(context.Background()).Nodes[0].DiskFull == "" { // the news is applied by the loop
		if time.Now().After(deadline) {
			t.Fatal("gpu-status does not show the full disk")
		}
		time.Sleep(5 * time.Millisecond)
	}
	j := h.submit(api.SubmitRequest{Command: "true", GPUCount: gpus(1)})
	for {
		h.waitCycle()
		q, _ := h.o.Job(j.ID)
		if q.PendingReason == "node_disk_full" {
			if !strings.Contains(q.PendingMessage, "node n1 takes none while its log disk (/d) has 1.0% free") {
				t.Errorf("pending message %q", q.PendingMessage)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job waits with %q %q, want node_disk_full", q.PendingReason, q.PendingMessage)
		}
	}
	h.noStart()
	h.o.NodeDisk("n1", "")
	if got := h.nextStart(); got.JobID != j.ID {
		t.Fatalf("started %s, want %s", got.JobID, j.ID)
	}
}

// The server stores at most MaxLogSize bytes of an attempt's shipped
// output, then one marker line; later chunks are accepted and dropped.
func TestWriteLogCapped(t *testing.T) {
	h := start(t, "", nil)
	j := h.submit(api.SubmitRequest{Command: "true", GPUCount: gpus(1)})
	h.nextStart()
	h.o.cfg.MaxLogSize = 10
	for i, c := range []struct {
		off  int64
		data string
	}{{0, "0123456"}, {7, "789abc"}, {13, "def"}, {0, "0123456789abcdef"}} {
		if err := h.o.WriteLog(api.LogChunk{NodeID: "n1", JobID: j.ID, Offset: c.off, Data: []byte(c.data)}); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	for _, c := range []api.LogChunk{{Rank: 1}, {Attempt: 1}} { // a one-node job on its first attempt
		c.NodeID, c.JobID, c.Data = "n1", j.ID, []byte("x")
		if err := h.o.WriteLog(c); err == nil {
			t.Errorf("chunk for rank %d attempt %d accepted", c.Rank, c.Attempt)
		}
	}
	b, err := os.ReadFile(h.o.LogPath(j.ID, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.HasPrefix(got, "0123456789\ncorral: the stored log reached its limit of 10 bytes") || strings.Count(got, "corral:") != 1 || strings.Contains(got, "abc") {
		t.Errorf("stored log %q", got)
	}
	if fi, _ := os.Stat(h.o.LogPath(j.ID, 0)); fi.Mode().Perm() != 0o600 {
		t.Errorf("stored log mode %v, want 0600", fi.Mode().Perm())
	}
}

// An agent whose disk is full when it registers takes no job before its
// first report.
func TestRegisterWithFullDisk(t *testing.T) {
	h := start(t, "", nil)
	reg := api.AgentRegistration{NodeID: "n1", Hostname: "n1", GPUs: []api.AgentGPU{{Index: 0, UUID: "GPU-n1-0", Model: "H100", MemoryMiB: 80 << 10}},
		DiskFull: "its log disk (/d) has 0.5% free, under --min-free-disk 5%"}
	if err := h.o.RegisterNode(context.Background(), reg, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	j := h.submit(api.SubmitRequest{Command: "true", GPUCount: gpus(1)})
	h.noStart()
	if q, _ := h.o.Job(j.ID); q.PendingReason != "node_disk_full" {
		t.Errorf("job waits with %q %q, want node_disk_full", q.PendingReason, q.PendingMessage)
	}
}
