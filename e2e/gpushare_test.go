package e2e

import (
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// gpuShareUp starts corral up on 4 simulated H100s: GPU 0 in 1g.10gb
// slices, GPU 1 as a 3g.40gb and a 4g.40gb, GPU 2 shared (MPS, with the
// agent tests' stand-in control binary), GPU 3 plain.
func gpuShareUp(t *testing.T) *server {
	t.Helper()
	return gpuShareUpAt(t, t.TempDir(), freePort(t), t.TempDir())
}

// gpuShareUpAt is gpuShareUp on a given data directory, port and MPS
// directory (a restart).
func gpuShareUpAt(t *testing.T, dataDir string, port int, mpsDir string) *server {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return startControl(t, dataDir, port, nil, "up", "--node-name", "e2e-node",
		"--simulate-gpus", "4:H100:80:mig=0:1g.10gb*7,1:3g.40gb+4g.40gb",
		"--shared-gpus", "2", "--mps-control", filepath.Join(root, "internal/agent/testdata/fake-mps-control"),
		"--mps-dir", mpsDir, "--notebook-mig", "1g.10gb")
}

// TestGPUShareRestart: after kill -9 of corral up, the restarted server
// knows who holds each slice and share from the store (the jobs are
// adopted), so a slice or share is still never given twice.
func TestGPUShareRestart(t *testing.T) {
	dataDir, port, mpsDir := t.TempDir(), freePort(t), t.TempDir()
	s := gpuShareUpAt(t, dataDir, port, mpsDir)
	slice := s.submit(map[string]any{"command": "sleep 120", "user": "ann", "mig_profile": "3g.40gb"})
	share := s.submit(map[string]any{"command": "sleep 120", "user": "ann", "gpu_share_mib": 60 << 10})
	s.waitState(slice.ID, api.StateRunning, 30*time.Second)
	s.waitState(share.ID, api.StateRunning, 30*time.Second)
	s.kill9()
	s = gpuShareUpAt(t, dataDir, port, mpsDir)
	s.waitState(slice.ID, api.StateRunning, 30*time.Second)
	c := s.cluster()
	if h := c.Nodes[0].GPUs[1].MIG.Devices[0].AllocatedTo; h != slice.ID {
		t.Fatalf("after the restart GPU 1's 3g.40gb is held by %q, want %s", h, slice.ID)
	}
	if sh := c.Nodes[0].GPUs[2].Shares; len(sh) != 1 || sh[0].JobID != share.ID {
		t.Fatalf("after the restart GPU 2's shares are %+v, want %s's", sh, share.ID)
	}
	again := s.submit(map[string]any{"command": "sleep 120", "user": "ann", "mig_profile": "3g.40gb"})
	more := s.submit(map[string]any{"command": "sleep 120", "user": "ann", "gpu_share_mib": 30 << 10})
	for _, id := range []string{again.ID, more.ID} {
		j := s.waitJob(id, 30*time.Second, "to say why it waits", func(j api.Job) bool { return j.PendingMessage != "" })
		if j.State != api.StateQueued || j.PendingReason != "insufficient_gpus" {
			t.Errorf("%s after the restart: %s %q %q, want it to wait for the part held", id, j.State, j.PendingReason, j.PendingMessage)
		}
	}
}

// TestGPUShare: whole-GPU jobs, MIG slices and MPS shares side by side on
// one node. No unit is given twice and no whole-GPU job lands on a MIG or
// a shared GPU; a slice job sees its slice alone, a share gets its MPS
// environment; jobs that cannot get a part say why; gpu-status names the
// holders; GPU-seconds and usage charge each part's fraction.
func TestGPUShare(t *testing.T) {
	s := gpuShareUp(t)
	// Fake device nodes of every GPU and /dev/mem: a job opens its own
	// GPU's alone (where the node holds jobs in cgroups, as root).
	devDir := t.TempDir()
	devs := map[string]int{"nvidia0": 195<<8 | 0, "nvidia1": 195<<8 | 1, "nvidia2": 195<<8 | 2, "nvidia3": 195<<8 | 3, "mem": 1<<8 | 1}
	mknod := true
	for name, dev := range devs {
		mknod = mknod && syscall.Mknod(filepath.Join(devDir, name), syscall.S_IFCHR|0o666, dev) == nil
	}
	probe := fmt.Sprintf(`for f in %s/*; do err=$( (: <>"$f") 2>&1 ); case "$err" in *"not permitted"*) echo "dev ${f##*/} EPERM";; *) echo "dev ${f##*/} ok";; esac; done; `, shellQuote(devDir))
	sub := func(user string, extra map[string]any) api.Job {
		req := map[string]any{"command": "env | grep -E '^(CUDA|CORRAL_MIG)' | sort; " + probe + "echo ready; sleep 120", "user": user, "gpu_count": 1}
		for k, v := range extra {
			req[k] = v
		}
		return s.submit(req)
	}
	// Asked wrong: one GPU, one part, each refusal naming its field.
	for _, bad := range []struct {
		req   map[string]any
		field string
	}{
		{map[string]any{"command": "true", "gpu_count": 2, "mig_profile": "1g.10gb"}, "gpu_count"},
		{map[string]any{"command": "true", "mig_profile": "1g.10gb", "gpu_share_mib": 1024}, "gpu_share_mib"},
		{map[string]any{"command": "true", "gpu_compute": 30}, "gpu_compute"},
		{map[string]any{"command": "true", "mig_profile": "huge"}, "mig_profile"},
	} {
		r := s.do("POST", "/queue/submit", bad.req, nil)
		if r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != bad.field {
			t.Fatalf("%v: want 422 naming %s, got %s", bad.req, bad.field, r)
		}
	}

	type want struct {
		job  api.Job
		frac float64
	}
	runs := map[string]*want{}
	run := func(name, user string, frac float64, extra map[string]any) {
		runs[name] = &want{job: sub(user, extra), frac: frac}
	}
	run("slice3g", "sa", 3.0/7, map[string]any{"mig_profile": "3g.40gb"})
	run("sliceAny", "sb", 4.0/7, map[string]any{"mig_profile": "any", "gpu_memory_gb": 15})
	run("slice1g", "sc", 1.0/7, map[string]any{"mig_profile": "1g.10gb"})
	run("share20", "alice", 0.25, map[string]any{"gpu_share_mib": 20 << 10, "gpu_compute": 25})
	run("share40", "alice", 0.5, map[string]any{"gpu_share_mib": 40 << 10})
	run("whole", "wa", 1, nil)
	// These wait: no 3g.40gb left, bob may not join alice's MPS server,
	// and the one plain GPU is taken.
	wait3g := sub("sd", map[string]any{"mig_profile": "3g.40gb"})
	waitBob := sub("bob", map[string]any{"gpu_share_mib": 10 << 10})
	waitWhole := sub("wb", nil)

	for name, w := range runs {
		j := s.waitState(w.job.ID, api.StateRunning, 60*time.Second)
		waitFor(t, 30*time.Second, func() string { return name + " to print its environment" },
			func() bool { return strings.Contains(s.logs(j.ID), "ready") })
		w.job = s.job(j.ID)
	}
	// No unit given twice; whole GPUs only on GPU 3.
	type unit struct {
		gpu  int
		part string
	}
	held := map[unit]string{}
	for name, w := range runs {
		if len(w.job.Allocation) != 1 {
			t.Fatalf("%s: allocation %+v, want one", name, w.job.Allocation)
		}
		a := w.job.Allocation[0]
		u := unit{gpu: a.GPUID, part: "whole"}
		switch {
		case a.MIG != nil:
			u.part = fmt.Sprintf("mig%d", a.MIG.Index)
			if a.GPUID > 1 {
				t.Errorf("%s: a slice on GPU %d, which is not in MIG mode", name, a.GPUID)
			}
		case a.ShareMiB > 0:
			u.part = name // shares of one GPU are told apart by job
			if a.GPUID != 2 {
				t.Errorf("%s: a share on GPU %d, which is not shared", name, a.GPUID)
			}
		default:
			if a.GPUID != 3 {
				t.Errorf("%s: a whole GPU %d, which is in MIG mode or shared", name, a.GPUID)
			}
		}
		if other, dup := held[u]; dup {
			t.Fatalf("%v given to %s and %s", u, other, name)
		}
		held[u] = name
		if math.Abs(w.job.GPUEquivalents-w.frac) > 1e-6 {
			t.Errorf("%s: gpu_equivalents %g, want %g", name, w.job.GPUEquivalents, w.frac)
		}
	}
	// What each job sees.
	for _, name := range []string{"slice3g", "sliceAny", "slice1g"} {
		w := runs[name]
		uuid := w.job.Allocation[0].MIG.UUID
		if !strings.HasPrefix(uuid, "MIG-") || !strings.Contains(s.logs(w.job.ID), "CUDA_VISIBLE_DEVICES="+uuid+"\n") {
			t.Errorf("%s: want CUDA_VISIBLE_DEVICES=%s alone; log:\n%s", name, uuid, s.logs(w.job.ID))
		}
	}
	if p := runs["sliceAny"].job.Allocation[0].MIG.Profile; p != "4g.40gb" {
		t.Errorf("mig any with 15 GB got %s, want the 4g.40gb (the 3g.40gb was taken, 1g.10gb too small)", p)
	}
	for name, env := range map[string][]string{
		"share20": {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", "CUDA_MPS_PIPE_DIRECTORY=/", "CUDA_VISIBLE_DEVICES=0\n"},
		"share40": {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=40960M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100"},
	} {
		log := s.logs(runs[name].job.ID)
		for _, e := range env {
			if !strings.Contains(log, e) {
				t.Errorf("%s: want %q in its environment; log:\n%s", name, e, log)
			}
		}
	}
	// Devices outside a job's own stay closed to it.
	if c := s.cluster(); !mknod || !strings.HasPrefix(c.Nodes[0].Containment, "cgroup-") {
		t.Logf("device nodes not checked: mknod %v, containment %q (needs root and cgroups)", mknod, c.Nodes[0].Containment)
	} else {
		for name, w := range runs {
			own := fmt.Sprintf("nvidia%d", w.job.Allocation[0].GPUID)
			log := s.logs(w.job.ID)
			for dev := range devs {
				want := "dev " + dev + " EPERM\n"
				if dev == own {
					want = "dev " + dev + " ok\n"
				}
				if !strings.Contains(log, want) {
					t.Errorf("%s on GPU %d: want %q; log:\n%s", name, w.job.Allocation[0].GPUID, want, log)
				}
			}
		}
	}
	// Those that wait say why.
	for id, text := range map[string]string{
		wait3g.ID:    "needs a free 3g.40gb MIG slice; the 1 on e2e-node is held by " + runs["slice3g"].job.ShortID(),
		waitBob.ID:   "needs 10 GB on a shared GPU",
		waitWhole.ID: "needs 1 GPU",
	} {
		j := s.waitJob(id, 30*time.Second, "to say why it waits", func(j api.Job) bool { return j.PendingMessage != "" })
		if j.State != api.StateQueued || !strings.Contains(j.PendingMessage, text) {
			t.Errorf("%s: %s %q, want queued saying %q", id, j.State, j.PendingMessage, text)
		}
	}
	// gpu-status names each slice's and share's holder.
	c := s.cluster()
	gs := c.Nodes[0].GPUs
	if h := gs[1].MIG.Devices[0].AllocatedTo; h != runs["slice3g"].job.ID {
		t.Errorf("gpu-status: GPU 1 slice 0 held by %q, want %s", h, runs["slice3g"].job.ID)
	}
	if !gs[2].Shared || len(gs[2].Shares) != 2 || gs[2].ShareLimits != api.ShareLimitsMPS {
		t.Errorf("gpu-status: GPU 2 shared %v with shares %+v, limits %q; want alice's two, held by MPS", gs[2].Shared, gs[2].Shares, gs[2].ShareLimits)
	}

	// Accounting: each attempt charged its fraction of a GPU.
	for _, w := range runs {
		s.mustJSON("DELETE", "/queue/"+w.job.ID, nil, http.StatusAccepted, nil)
	}
	for name, w := range runs {
		j := s.waitTerminal(w.job.ID, 60*time.Second)
		secs := j.FinishedAt.Sub(*j.StartedAt).Seconds()
		if math.Abs(j.GPUSeconds-w.frac*secs) > 0.01*secs+0.01 {
			t.Errorf("%s: %g GPU-seconds over %.2f s, want %g of a GPU", name, j.GPUSeconds, secs, w.frac)
		}
		w.job = j
	}
	var rep usage.Report
	s.mustJSON("GET", "/usage?by=user", nil, http.StatusOK, &rep)
	byUser := map[string]float64{}
	for _, r := range rep.Rows {
		byUser[r.Key] = r.GPUSeconds
	}
	for _, name := range []string{"slice3g", "sliceAny", "slice1g", "whole"} {
		j := runs[name].job
		if math.Abs(byUser[j.User]-j.GPUSeconds) > 0.01 {
			t.Errorf("%s: usage of %s %g GPU-seconds, the job's %g", name, j.User, byUser[j.User], j.GPUSeconds)
		}
	}
	if want := runs["share20"].job.GPUSeconds + runs["share40"].job.GPUSeconds; math.Abs(byUser["alice"]-want) > 0.01 {
		t.Errorf("usage of alice %g GPU-seconds, her shares' %g", byUser["alice"], want)
	}
	// A notebook of 1 GPU gets the server's default slice (--notebook-mig);
	// one that names a GPU type keeps a whole GPU.
	nb := s.submit(map[string]any{"command": "sleep 60", "notebook": true, "gpu_count": 1})
	nbWhole := s.submit(map[string]any{"command": "sleep 60", "notebook": true, "gpu_count": 1, "gpu_type": "H100"})
	if nb.MIGProfile != "1g.10gb" || nbWhole.MIGProfile != "" {
		t.Errorf("notebooks' mig_profile %q and %q, want 1g.10gb and none", nb.MIGProfile, nbWhole.MIGProfile)
	}
	for _, id := range []string{nb.ID, nbWhole.ID} { // 200 while queued, 202 once started
		if r := s.do("DELETE", "/queue/"+id, nil, nil); r.Status != http.StatusOK && r.Status != http.StatusAccepted {
			t.Fatalf("cancel notebook %s: %s", id, r)
		}
	}
	// Freed, the waiting jobs get their parts.
	for _, id := range []string{wait3g.ID, waitBob.ID, waitWhole.ID} {
		s.waitState(id, api.StateRunning, 60*time.Second)
	}
}
