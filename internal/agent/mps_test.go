package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// fakeMPS is the node's MPS daemons for GPUs 0 and 1, run by the stand-in
// control binary (testdata/fake-mps-control).
func fakeMPS(t *testing.T) (*tasks, string) {
	t.Helper()
	bin, err := filepath.Abs("testdata/fake-mps-control")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mps")
	m, err := newMPS(bin, dir, []int{0, 1}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return &tasks{mps: m, byKey: map[taskKey]*task{}, uuids: map[int]string{0: "GPU-aaa", 1: "GPU-bbb"}}, dir
}

// A share starts its GPU's MPS daemon (once per GPU and account, with the
// GPU alone visible and a pipe directory of its own); a share of another
// account's job on that GPU is refused while the daemon serves the first
// (never two accounts in one MPS server); a GPU not shared takes none;
// and once no share runs, the daemons are told to quit.
func TestMPSDaemonPerGPUAndAccount(t *testing.T) {
	ts, dir := fakeMPS(t)
	ctx := context.Background()
	me := uidOf(nil)
	other := &credential{uid: me + 1000, gid: 1000, name: "other"}
	share := func(gpu int) api.TaskSpec {
		return api.TaskSpec{JobID: "j", GPUs: []int{gpu}, GPUShareMiB: 20480, GPUCompute: 25}
	}
	for _, tc := range []struct {
		name    string
		spec    api.TaskSpec
		cred    *credential
		wantErr string
	}{
		{"first share starts GPU 0's daemon", share(0), nil, ""},
		{"same account joins it", share(0), nil, ""},
		{"another account is refused", share(0), other, ErrMPSOtherUser.Error()},
		{"another account on GPU 1 gets its own", share(1), other, ""},
		{"GPU 2 is not shared", api.TaskSpec{GPUs: []int{2}, GPUShareMiB: 1024}, nil, "not in --shared-gpus"},
		{"a share of two GPUs", api.TaskSpec{GPUs: []int{0, 1}, GPUShareMiB: 1024}, nil, "of one GPU, not 2"},
		{"no share: nothing to start", api.TaskSpec{GPUs: []int{0}}, other, ""},
	} {
		err := ts.prepareShare(ctx, tc.spec, tc.cred)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	if err := ts.prepareShare(ctx, share(0), other); !errors.Is(err, ErrMPSOtherUser) {
		t.Errorf("another account's share: %v, want ErrMPSOtherUser", err)
	}
	if got := ts.mps.running(0); !slices.Equal(got, []uint32{me}) {
		t.Errorf("GPU 0's daemon serves %v, want [%d]", got, me)
	}
	log, err := os.ReadFile(filepath.Join(ts.mps.home(0, me), mpsLog, "control.log"))
	if err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(ts.mps.home(0, me), mpsPipe)
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=GPU-aaa", "CUDA_MPS_PIPE_DIRECTORY=" + pipe} {
		if !strings.Contains(string(log), want+"\n") {
			t.Errorf("daemon environment lacks %q:\n%s", want, log)
		}
	}
	if fi, err := os.Stat(pipe); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("pipe directory %s: %v %v, want mode 0700 (its account's alone)", pipe, fi, err)
	}

	// A running share keeps its daemon; once none runs, all quit.
	ts.byKey[taskKey{"j", 0, 0}] = &task{spec: share(0)}
	ts.releaseShares(ctx)
	if got := ts.mps.running(0); len(got) != 1 {
		t.Errorf("GPU 0's daemon stopped while its share runs: %v", got)
	}
	if got := ts.mps.running(1); len(got) != 0 {
		t.Errorf("GPU 1's daemon runs on with no share: %v", got)
	}
	ts.byKey[taskKey{"j", 0, 0}].exited = &api.TaskStatus{}
	ts.releaseShares(ctx)
	if got := ts.mps.running(0); len(got) != 0 {
		t.Errorf("GPU 0's daemon runs on with no share: %v", got)
	}
	if homes, _ := filepath.Glob(filepath.Join(dir, "gpu*")); len(homes) != 0 {
		t.Errorf("stopped daemons' directories left: %v", homes)
	}
	// Now another account's share may start there.
	if err := ts.prepareShare(ctx, share(0), other); err != nil {
		t.Errorf("after the daemon stopped, another account's share: %v", err)
	}
}

// A share's job gets its MPS pipe directory, memory limit and compute
// share, and sees its server's one GPU as device 0; a job without a share
// gets none of them.
func TestMPSShareEnv(t *testing.T) {
	ts, _ := fakeMPS(t)
	ts.nodeID, ts.stateDir = "n1", t.TempDir()
	me := uidOf(nil)
	envOf := func(s api.TaskSpec) map[string]string {
		m := map[string]string{}
		for _, kv := range ts.env(s, nil) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		spec api.TaskSpec
		want map[string]string
	}{
		{"share with compute", api.TaskSpec{JobID: "j", GPUs: []int{1}, GPUShareMiB: 20480, GPUCompute: 25}, map[string]string{
			"CUDA_VISIBLE_DEVICES": "0", "CUDA_MPS_PIPE_DIRECTORY": filepath.Join(ts.mps.home(1, me), mpsPipe),
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=20480M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25", "CORRAL_GPUS": "1"}},
		{"share, all compute", api.TaskSpec{JobID: "j", GPUs: []int{0}, GPUShareMiB: 512}, map[string]string{
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=512M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100"}},
		{"whole GPU", api.TaskSpec{JobID: "j", GPUs: []int{1}}, map[string]string{
			"CUDA_VISIBLE_DEVICES": "1", "CUDA_MPS_PIPE_DIRECTORY": "", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": ""}},
	} {
		got := envOf(tc.spec)
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q", tc.name, k, got[k], v)
			}
		}
	}
}

// TestIsCorralMPS: the agent's MPS daemon and the server it spawns are
// told from foreign processes on a shared GPU by the daemon's mark, in
// the process's own environment or its parent's.
func TestIsCorralMPS(t *testing.T) {
	start := func(t *testing.T, env []string, script string) int {
		t.Helper()
		cmd := osexec.Command("sh", "-c", script)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Process.Kill(); cmd.Wait() })
		var pid int
		if _, err := fmt.Fscan(out, &pid); err != nil {
			t.Fatalf("read the pid: %v", err)
		}
		return pid
	}
	path := "PATH=" + os.Getenv("PATH")
	tests := []struct {
		name   string
		env    []string
		script string // prints the pid to ask about
		want   bool
	}{
		// The shell asked about never execs (a process's environment
		// cannot be read while it execs; the trailing ":" keeps a shell
		// from exec'ing its last command).
		{"the daemon, marked", []string{path, mpsGPUVar + "=GPU-aaa"}, "echo $$; sleep 30; :", true},
		{"the server it spawned, unmarked itself", []string{path, mpsGPUVar + "=GPU-aaa"}, "env -i sleep 30 & echo $!; wait", true},
		{"a foreign process", []string{path}, "echo $$; sleep 30; :", false},
		{"a foreign process's child", []string{path, "CUDA_VISIBLE_DEVICES=0"}, "sleep 30 & echo $!; wait", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid := start(t, tt.env, tt.script)
			if got := isCorralMPS(pid); got != tt.want {
				t.Errorf("isCorralMPS(%d) = %v, want %v", pid, got, tt.want)
			}
		})
	}
}
