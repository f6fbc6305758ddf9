package orchestrator

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// A job's image and mounts reach its task; the digest its agent reports
// at the start is the job's image_digest.
func TestImageReachesTaskAndDigestIsRecorded(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	h := startConfig(t, filepath.Join(t.TempDir(), "corral.db"), Config{Nodes: []Node{simNode("n1", 2)}, Tick: 10 * time.Millisecond, Now: clk.now})
	j := h.submit(api.SubmitRequest{Command: "nvidia-smi", GPUCount: gpus(1), Image: " localhost/corral-test:1 ",
		Mounts: []string{"/data:/data:ro", "/scratch/x:/work"}})
	if j.Image != "localhost/corral-test:1" || !slices.Equal(j.Mounts, []string{"/data:/data:ro", "/scratch/x:/work"}) {
		t.Fatalf("job image %q mounts %v", j.Image, j.Mounts)
	}
	task := h.nextStart()
	if task.Image != j.Image || !slices.Equal(task.Mounts, j.Mounts) {
		t.Fatalf("task image %q mounts %v", task.Image, task.Mounts)
	}
	digest := "localhost/corral-test@sha256:" + "ab12"
	h.o.Sink(exec.Update{JobID: j.ID, Attempt: task.Attempt, Kind: exec.Started, At: clk.now(), PID: 1, ImageDigest: digest})
	got := h.waitState(j.ID, api.StateRunning)
	if got.ImageDigest != digest {
		t.Fatalf("image_digest %q, want %q", got.ImageDigest, digest)
	}
}

// Bad images and mounts are refused with a 422 naming the field, and
// the Slurm and Ray pools refuse images.
func TestImageValidation(t *testing.T) {
	h := startConfig(t, filepath.Join(t.TempDir(), "corral.db"), Config{Nodes: []Node{simNode("n1", 2)}, Tick: time.Hour,
		Pools: []string{api.PoolAgents, api.PoolSlurm, api.PoolRay}})
	long := make([]byte, 600)
	for i := range long {
		long[i] = 'a'
	}
	for _, c := range []struct {
		name, field string
		req         api.SubmitRequest
	}{
		{"space in image", "image", api.SubmitRequest{Command: "x", Image: "ubuntu latest"}},
		{"flag as image", "image", api.SubmitRequest{Command: "x", Image: "--privileged"}},
		{"overlong image", "image", api.SubmitRequest{Command: "x", Image: string(long)}},
		{"control char", "image", api.SubmitRequest{Command: "x", Image: "ubuntu\x1b"}},
		{"mounts without image", "mounts", api.SubmitRequest{Command: "x", Mounts: []string{"/a:/b"}}},
		{"relative source", "mounts", api.SubmitRequest{Command: "x", Image: "i", Mounts: []string{"data:/data"}}},
		{"relative target", "mounts", api.SubmitRequest{Command: "x", Image: "i", Mounts: []string{"/data:data"}}},
		{"no target", "mounts", api.SubmitRequest{Command: "x", Image: "i", Mounts: []string{"/data"}}},
		{"bad option", "mounts", api.SubmitRequest{Command: "x", Image: "i", Mounts: []string{"/data:/data:rx"}}},
		{"comma", "mounts", api.SubmitRequest{Command: "x", Image: "i", Mounts: []string{"/a,b:/data"}}},
		{"unclean", "mounts", api.SubmitRequest{Command: "x", Image: "i", Mounts: []string{"/a/../etc:/data"}}},
		{"over /proc", "mounts", api.SubmitRequest{Command: "x", Image: "i", Mounts: []string{"/a:/proc/1"}}},
		{"over root", "mounts", api.SubmitRequest{Command: "x", Image: "i", Mounts: []string{"/a:/"}}},
		{"slurm pool", "image", api.SubmitRequest{Command: "x", Image: "i", Pool: api.PoolSlurm}},
		{"ray pool", "image", api.SubmitRequest{Command: "x", Image: "i", Pool: api.PoolRay}},
		{"output file", "output", api.SubmitRequest{Command: "x", Image: "i", Output: "/tmp/out-%j.log"}},
		{"error file", "error", api.SubmitRequest{Command: "x", Image: "i", Error: "/tmp/err-%j.log"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(h.o.Jobs(JobFilter{}))
			_, _, err := h.o.Submit(context.Background(), c.req, "")
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Field != c.field || ae.Status != 422 {
				t.Fatalf("%v, want a 422 naming %s", err, c.field)
			}
			if after := len(h.o.Jobs(JobFilter{})); after != before {
				t.Fatalf("a refused submission made a job (%d -> %d)", before, after)
			}
		})
	}
}
