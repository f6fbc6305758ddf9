package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"

	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/api"
)

// A job's cgroup limits are its own, else the node's per-GPU defaults
// times its GPUs; its device minors follow the node's GPUs.
func TestContainSpec(t *testing.T) {
	ts := &tasks{limits: limits{memPerGPU: 1024, cpusPerGPU: 1.5}, minors: map[int]int{0: 4, 1: 5}}
	for _, tc := range []struct {
		name string
		spec api.TaskSpec
		want contain.Spec
	}{
		{"own limits", api.TaskSpec{GPUs: []int{1}, MemMiB: 64, CPUs: 0.5}, contain.Spec{MemMiB: 64, CPUs: 0.5, GPUMinors: []int{5}}},
		{"defaults per GPU", api.TaskSpec{GPUs: []int{0, 1}}, contain.Spec{MemMiB: 2048, CPUs: 3, GPUMinors: []int{4, 5}}},
		{"no GPUs, no limits", api.TaskSpec{}, contain.Spec{}},
		{"unknown minor: the index", api.TaskSpec{GPUs: []int{7}, MemMiB: 1}, contain.Spec{MemMiB: 1, CPUs: 1.5, GPUMinors: []int{7}}},
	} {
		got := ts.containSpec(tc.spec)
		if got.MemMiB != tc.want.MemMiB || got.CPUs != tc.want.CPUs || !slices.Equal(got.GPUMinors, tc.want.GPUMinors) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// The task caps, the attempt's and the node's, go with every spec (the
	// shim makes the node's parent again with its cap where it is gone).
	ts.limits.pids, ts.limits.nodePids = 64, 1000
	if got := ts.containSpec(api.TaskSpec{}); got.Pids != 64 || got.NodePids != 1000 {
		t.Errorf("task caps: pids %d, node_pids %d; want 64, 1000", got.Pids, got.NodePids)
	}
}

// --containment process-group: the agent holds jobs by process groups,
// says so, and registers it.
func TestContainmentProcessGroup(t *testing.T) {
	var logs strings.Builder
	a := &Agent{cfg: Config{NodeID: "n1", StateDir: t.TempDir(), Containment: contain.ProcessGroup}, log: slog.New(slog.NewTextHandler(&logs, nil)),
		tasks: &tasks{mode: contain.ProcessGroup}}
	a.setupContainment()
	if a.tasks.mode != contain.ProcessGroup || a.tasks.cgroupParent != "" {
		t.Fatalf("mode %q, parent %q", a.tasks.mode, a.tasks.cgroupParent)
	}
	if !strings.Contains(logs.String(), "process groups only") {
		t.Errorf("no warning said why: %s", logs.String())
	}
	if _, err := New(Config{NodeID: "n1", Link: fakeLink{}, StateDir: "s", LogDir: "l", Containment: "jail"}); err == nil {
		t.Error("--containment jail accepted")
	}
	if _, err := New(Config{NodeID: "n1", Link: fakeLink{}, StateDir: "s", LogDir: "l", DefaultMemPerGPU: -1}); err == nil {
		t.Error("a negative --default-mem-per-gpu accepted")
	}
	if _, err := New(Config{NodeID: "n1", Link: fakeLink{}, StateDir: "s", LogDir: "l", MaxPidsPerNode: -1}); err == nil {
		t.Error("a negative --max-pids-per-node accepted")
	}
}

// fakeLink is a Link that is never called.
type fakeLink struct{}

func (fakeLink) Register(context.Context, api.AgentRegistration) (api.AgentConfig, error) {
	return api.AgentConfig{}, nil
}
func (fakeLink) Sync(context.Context, api.AgentReport) (api.AgentWork, error) {
	return api.AgentWork{}, nil
}
func (fakeLink) ShipLog(context.Context, api.LogChunk) error { return nil }

// A job run in its cgroup, under a shim or directly, keeps its visible
// behaviour ($0, exit code), takes what it forked (setsid) down with it,
// and reports an OOM kill.
func TestTasksInCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroups cannot be written here")
	}
	for _, detach := range []bool{true, false} {
		t.Run(fmt.Sprintf("detach=%v", detach), func(t *testing.T) {
			dir := t.TempDir()
			ts := newTasks(t, dir, 0)
			ts.detach = detach
			containTasks(t, ts, dir)
			os.MkdirAll(ts.stateDir, 0o755)

			pidFile := filepath.Join(dir, "escapee")
			ts.start(api.TaskSpec{JobID: "j1", GPUs: []int{0}, Command: fmt.Sprintf(
				`echo "zero=$0"; setsid sh -c 'echo $$ > %s; exec sleep 1000' & while [ ! -s %s ]; do sleep 0.02; done; exit 3`, pidFile, pidFile)})
			st := waitTask(t, ts, "the task to end", func(s api.TaskStatus) bool { return s.JobID == "j1" && s.State == api.TaskExited })
			if st.ExitCode != 3 || st.OOMKilled {
				t.Errorf("status %+v, want exit 3 and no OOM", st)
			}
			log, _ := os.ReadFile(ts.logPath(taskKey{"j1", 0, 0}))
			if !strings.Contains(string(log), "zero="+jobShell()) {
				t.Errorf("log %q: want $0 %s", log, jobShell())
			}
			b, _ := os.ReadFile(pidFile)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			deadline := time.Now().Add(5 * time.Second)
			for alive(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("the setsid escapee %d outlived its job", pid)
				}
				time.Sleep(10 * time.Millisecond) // poll interval
			}

			if ts.inJobCgroup(os.Getpid()) {
				t.Error("the test process counts as in a job's cgroup")
			}
			ts.start(api.TaskSpec{JobID: "j3", Command: "exec sleep 1000"})
			st3 := waitTask(t, ts, "j3 to run", func(s api.TaskStatus) bool { return s.JobID == "j3" && s.PID > 0 })
			waitFor := time.Now().Add(5 * time.Second)
			for !ts.inJobCgroup(st3.PID) && time.Now().Before(waitFor) {
				time.Sleep(10 * time.Millisecond) // poll interval: the shim admits it
			}
			if !ts.inJobCgroup(st3.PID) {
				t.Errorf("job pid %d is not seen in its cgroup", st3.PID)
			}
			ts.stop(taskKey{"j3", 0, 0}, 0, "")

			ts.start(api.TaskSpec{JobID: "j2", MemMiB: 32, Command: `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`})
			st = waitTask(t, ts, "the hog to end", func(s api.TaskStatus) bool { return s.JobID == "j2" && s.State == api.TaskExited })
			if !st.OOMKilled || st.ExitCode == 0 {
				t.Errorf("memory hog: status %+v, want an OOM kill", st)
			}
		})
	}
}

// A `corral up` stopped while its job runs leaves the node's cgroup
// parent to its shim host; the host removes it once its last job has
// ended, so no parent is left behind per stopped server.
func TestShimHostReleasesItsParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroups cannot be written here")
	}
	dir := t.TempDir()
	ts := newHostedTasks(t, dir)
	parentDir := ownCgroupDir(t, containTasks(t, ts, dir))

	release := filepath.Join(dir, "release")
	ts.start(api.TaskSpec{JobID: "j1", Command: "while [ ! -e " + release + " ]; do sleep 0.02; done"})
	waitTask(t, ts, "the job to run", func(s api.TaskStatus) bool { return s.PID > 0 })
	r, _ := readRecord(recordPath(ts.stateDir, taskKey{"j1", 0, 0}))
	ts.host.close() // the agent goes; its job runs on
	if _, err := os.Stat(parentDir); err != nil {
		t.Fatalf("the parent is gone while its job runs: %v", err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(r.ShimPID) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if alive(r.ShimPID) {
		t.Fatalf("the shim host %d still runs", r.ShimPID)
	}
	if _, err := os.Stat(parentDir); !os.IsNotExist(err) {
		t.Errorf("the node's cgroup parent %s is left behind after its host exited (stat: %v)", parentDir, err)
	}
}

// containTasks gives ts a node cgroup parent of its own, prepared as
// setupContainment does (before the probe's cgroup), and returns it; it
// skips the test where cgroups cannot be written.
func containTasks(t *testing.T, ts *tasks, dir string) string {
	t.Helper()
	parent := contain.Parent("n1", dir)
	tree, err := contain.NewTree(parent, contain.NodeDevices{})
	if err != nil {
		t.Skipf("cgroups cannot be resolved here: %v", err)
	}
	prepErr := tree.Prepare()
	if mode, err := contain.Probe(parent); mode == contain.ProcessGroup {
		t.Skipf("cgroups cannot be written here: %v", err)
	}
	t.Cleanup(func() { contain.Sweep(parent, func(string) bool { return false }); contain.RemoveIfEmpty(parent) })
	if prepErr != nil {
		t.Fatal(prepErr)
	}
	ts.mode, ts.cgroupParent, ts.cgroupTree = contain.Mode(), parent, tree
	return parent
}

// ownCgroupDir is where the cgroup at path (relative to this process's
// own cgroups) is, in the devices hierarchy under v1.
func ownCgroupDir(t *testing.T, path string) string {
	t.Helper()
	sub := "devices"
	if contain.Mode() == contain.CgroupV2 {
		sub = ""
	}
	own, err := cgroups.GetOwnCgroupPath(sub)
	if err != nil {
		t.Skipf("own cgroup: %v", err)
	}
	return filepath.Join(own, path)
}

// A task's cgroup opens the capabilities of its own MIG devices: those it
// names, or, given a whole GPU with MIG on, every one of that GPU's; a
// GPU without MIG, or a MIG device the driver lists no capability for,
// adds none.
func TestContainSpecMIGCaps(t *testing.T) {
	ts := &tasks{log: slog.New(slog.DiscardHandler), minors: map[int]int{0: 4, 1: 5},
		devices: contain.NodeDevices{UVMMajor: 237, CapsMajor: 236},
		migCaps: contain.MIGCaps{"config": 1, "monitor": 2,
			"gpu4/gi1/access": 10, "gpu4/gi1/ci0/access": 11, "gpu4/gi2/access": 20, "gpu4/gi2/ci0/access": 21},
		migs: map[int][]api.MIGDevice{0: {
			{UUID: "MIG-a", GPUInstance: 1, ComputeInstance: 0},
			{UUID: "MIG-b", GPUInstance: 2, ComputeInstance: 0},
			{UUID: "MIG-c", GPUInstance: 9, ComputeInstance: 0}, // not in the driver's list
		}}}
	for _, tc := range []struct {
		name string
		spec api.TaskSpec
		caps []int64
	}{
		{"one slice", api.TaskSpec{GPUs: []int{0}, MIGDevices: []string{"MIG-b"}}, []int64{20, 21}},
		{"whole GPU with MIG on", api.TaskSpec{GPUs: []int{0}}, []int64{10, 11, 20, 21}},
		{"GPU without MIG", api.TaskSpec{GPUs: []int{1}}, nil},
		{"slice of another GPU", api.TaskSpec{GPUs: []int{1}, MIGDevices: []string{"MIG-a"}}, nil},
	} {
		got := ts.containSpec(tc.spec)
		if !slices.Equal(got.CapMinors, tc.caps) || got.Devices.CapsMajor != 236 || got.Devices.UVMMajor != 237 {
			t.Errorf("%s: caps %v devices %+v, want caps %v", tc.name, got.CapMinors, got.Devices, tc.caps)
		}
	}
	env := "\n" + strings.Join(ts.env(api.TaskSpec{JobID: "j", GPUs: []int{0}, MIGDevices: []string{"MIG-b"}}, nil), "\n") + "\n"
	if !strings.Contains(env, "\nCUDA_VISIBLE_DEVICES=MIG-b\n") || !strings.Contains(env, "\nCORRAL_MIG_DEVICES=MIG-b\n") {
		t.Errorf("a slice's task sees its slice alone; env:\n%s", env)
	}
}

// Where the NVIDIA driver is loaded but nvidia-uvm is not yet (the CUDA
// driver loads it on first use, which a job cannot), the agent loads it
// (nvidia-modprobe -u) before the first job, so that the jobs' filter
// names its major; where that fails it says so and opens nothing more.
func TestReadNodeDevicesLoadsUVM(t *testing.T) {
	for _, tc := range []struct {
		name     string
		devices  string
		modprobe string // the stand-in's script; "": none found
		uvm      int64
		warn     bool
	}{
		{"loaded already", "Character devices:\n195 nvidia\n237 nvidia-uvm\n", "exit 1", 237, false},
		{"loaded by modprobe", "Character devices:\n195 nvidia\n", `[ "$*" = "-u -c=0" ] && echo "238 nvidia-uvm" >>"$DEVICES"`, 238, false},
		{"modprobe fails", "Character devices:\n195 nvidia\n", "exit 1", 0, true},
		{"no NVIDIA driver: nothing to load", "Character devices:\n1 mem\n", `echo "238 nvidia-uvm" >>"$DEVICES"`, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			devices := filepath.Join(dir, "devices")
			os.WriteFile(devices, []byte(tc.devices), 0o644)
			modprobe := filepath.Join(dir, "nvidia-modprobe")
			os.WriteFile(modprobe, []byte("#!/bin/sh\nDEVICES="+devices+"\n"+tc.modprobe+"\n"), 0o755)
			var logs strings.Builder
			a := &Agent{cfg: Config{ProcDevices: devices, MIGMinorsFile: filepath.Join(dir, "none"), NvidiaModprobe: modprobe},
				log: slog.New(slog.NewTextHandler(&logs, nil)), tasks: &tasks{}}
			a.readNodeDevices()
			if a.tasks.devices.UVMMajor != tc.uvm {
				t.Errorf("nvidia-uvm major %d, want %d", a.tasks.devices.UVMMajor, tc.uvm)
			}
			if warned := strings.Contains(logs.String(), "nvidia-uvm is not loaded"); warned != tc.warn {
				t.Errorf("warned %v, want %v: %s", warned, tc.warn, logs.String())
			}
		})
	}
}
