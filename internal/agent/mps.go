package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// MPS shares: a GPU the admin marks shareable (corral agent
// --shared-gpus 0,1) runs jobs that ask for a share of it
// (TaskSpec.GPUShareMiB, GPUCompute) as clients of one MPS control
// daemon of its own, started by the agent when the GPU's first share
// starts and told to quit once its last one has ended:
//
//	nvidia-cuda-mps-control -d   CUDA_VISIBLE_DEVICES=<the GPU's UUID>
//	                             CUDA_MPS_PIPE_DIRECTORY=<dir>/gpuN-uidU/pipe (the job's account's, mode 0700)
//	                             CUDA_MPS_LOG_DIRECTORY=<dir>/gpuN-uidU/log
//
// A share's job gets CUDA_MPS_PIPE_DIRECTORY (that pipe directory),
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<MiB>M (its memory; device 0, as MPS
// clients count the devices their server sees: the one GPU, which is also
// why its CUDA_VISIBLE_DEVICES is 0) and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
// (its compute percent; 100 when it names none).
//
// Jobs of different Unix accounts never share an MPS server (MPS runs them
// in one server, serialises them, and a fatal fault in one reaches all):
// a GPU's daemon serves one account at a time, its pipe directory is
// that account's alone, and a share of another account's job fails to
// start while it runs (the scheduler is not to place one there; this is
// the node's backstop).

// mpsPipe, mpsLog: a daemon's directories under its GPU-and-account one.
const (
	mpsPipe = "pipe"
	mpsLog  = "log"
	// mpsControl is the control daemon's pipe in its pipe directory:
	// present while the daemon runs.
	mpsControl = "control"
)

// ErrMPSOtherUser is why a share cannot start on a GPU whose MPS daemon
// serves another account's jobs.
var ErrMPSOtherUser = errors.New("the GPU's MPS server serves another account's jobs")

// mps runs a node's MPS control daemons. Safe for concurrent use.
type mps struct {
	bin    string       // nvidia-cuda-mps-control (or a stand-in, for tests)
	dir    string       // where each daemon's directories are made
	shared map[int]bool // the GPUs that take shares
	log    *slog.Logger
	mu     sync.Mutex // one start or stop at a time
}

// newMPS returns the node's MPS daemons for the shared GPUs; nil where
// none is shared. dir is made (0755: jobs reach their pipe directory
// through it; each is its account's own).
func newMPS(bin, dir string, shared []int, log *slog.Logger) (*mps, error) {
	if len(shared) == 0 {
		return nil, nil
	}
	if bin == "" {
		bin = "nvidia-cuda-mps-control"
	}
	path, err := osexec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("--shared-gpus: the MPS control binary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--shared-gpus: MPS directory: %w", err)
	}
	// In a shared temporary directory another account could have made it
	// first: it must be the agent's own directory, not a link.
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("--shared-gpus: MPS directory: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
		return nil, fmt.Errorf("--shared-gpus: MPS directory %s: not a directory of this agent's account", dir)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--shared-gpus: MPS directory: %w", err)
	}
	m := &mps{bin: path, dir: dir, shared: map[int]bool{}, log: log}
	for _, g := range shared {
		m.shared[g] = true
	}
	return m, nil
}

// home is the directory of GPU g's daemon for account uid.
func (m *mps) home(g int, uid uint32) string {
	return filepath.Join(m.dir, fmt.Sprintf("gpu%d-uid%d", g, uid))
}

// running lists the accounts GPU g's daemon runs for (at most one, but
// for a crash between a stop and a start).
func (m *mps) running(g int) []uint32 {
	homes, _ := filepath.Glob(filepath.Join(m.dir, fmt.Sprintf("gpu%d-uid*", g)))
	var out []uint32
	for _, h := range homes {
		if _, err := os.Stat(filepath.Join(h, mpsPipe, mpsControl)); err != nil {
			continue
		}
		_, u, _ := strings.Cut(filepath.Base(h), "-uid")
		if uid, err := strconv.ParseUint(u, 10, 32); err == nil {
			out = append(out, uint32(uid))
		}
	}
	return out
}

// acquire makes sure GPU g (its UUID uuid) has a daemon for account
// uid (gid its group), starting one where it has none; it fails with
// ErrMPSOtherUser where the GPU's daemon serves another account.
func (m *mps) acquire(ctx context.Context, g int, uuid string, uid, gid uint32) error {
	if !m.shared[g] {
		return fmt.Errorf("GPU %d takes no shares (not in --shared-gpus)", g)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, other := range m.running(g) {
		if other == uid {
			return nil
		}
		return fmt.Errorf("GPU %d: %w (uid %d)", g, ErrMPSOtherUser, other)
	}
	home := m.home(g, uid)
	os.RemoveAll(home) // a stopped daemon's leftovers
	pipe, logDir := filepath.Join(home, mpsPipe), filepath.Join(home, mpsLog)
	for _, d := range []string{home, pipe, logDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("GPU %d: MPS directory: %w", g, err)
		}
	}
	// The account's own: its clients reach the pipes, no one else's do.
	for _, d := range []string{home, pipe} {
		if err := os.Chown(d, int(uid), int(gid)); err != nil && os.Geteuid() == 0 {
			return fmt.Errorf("GPU %d: MPS directory: %w", g, err)
		}
	}
	cmd := osexec.CommandContext(ctx, m.bin, "-d")
	cmd.Env = m.daemonEnv(uuid, home)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GPU %d: start the MPS control daemon: %w: %s", g, err, strings.TrimSpace(string(out)))
	}
	m.log.Info("started the MPS control daemon of a shared GPU", "gpu", g, "uid", uid, "pipe_directory", pipe)
	return nil
}

// daemonEnv is a daemon's environment (and that of the command that
// tells it to quit).
func (m *mps) daemonEnv(uuid, home string) []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"CUDA_MPS_PIPE_DIRECTORY=" + filepath.Join(home, mpsPipe), "CUDA_MPS_LOG_DIRECTORY=" + filepath.Join(home, mpsLog)}
	if uuid != "" {
		env = append(env, "CUDA_VISIBLE_DEVICES="+uuid, mpsGPUVar+"="+uuid)
	}
	return env
}

// isCorralMPS reports whether pid is an MPS process the agent started: the
// control daemon, whose environment it wrote, or the MPS server the daemon
// spawned (NVML lists that server, not its clients, on a shared GPU's
// processes), marked in its own environment or its parent's.
func isCorralMPS(pid int) bool {
	if _, ok := corralEnviron(pid)[mpsGPUVar]; ok {
		return true
	}
	ppid, ok := parentOf(pid)
	if !ok || ppid <= 1 {
		return false
	}
	_, ok = corralEnviron(ppid)[mpsGPUVar]
	return ok
}

// parentOf reads pid's parent from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	f, err := procStat(pid)
	if err != nil || len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// release tells the daemons of the shared GPUs that no running share
// uses (inUse: GPU -> true) to quit, and removes their directories.
func (m *mps) release(ctx context.Context, inUse map[int]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for g := range m.shared {
		if inUse[g] {
			continue
		}
		for _, uid := range m.running(g) {
			home := m.home(g, uid)
			cmd := osexec.CommandContext(ctx, m.bin)
			cmd.Env = m.daemonEnv("", home)
			cmd.Stdin = strings.NewReader("quit\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				m.log.Warn("could not stop the MPS control daemon of a shared GPU", "gpu", g, "uid", uid, "err", err, "output", strings.TrimSpace(string(out)))
				continue
			}
			os.RemoveAll(home)
			m.log.Info("stopped the MPS control daemon of a shared GPU: no share runs on it", "gpu", g, "uid", uid)
		}
	}
}

// shareEnv is the environment a share's job gets on top of the rest:
// its MPS pipe directory, memory limit and compute percent, and
// CUDA_VISIBLE_DEVICES=0 (its server's one GPU). Nil for a task that
// asks for no share.
func (m *mps) shareEnv(s api.TaskSpec, uid uint32) [][2]string {
	if m == nil || s.GPUShareMiB <= 0 || len(s.GPUs) != 1 {
		return nil
	}
	pct := s.GPUCompute
	if pct <= 0 || pct > 100 {
		pct = 100
	}
	return [][2]string{
		{"CUDA_VISIBLE_DEVICES", "0"},
		{"CUDA_MPS_PIPE_DIRECTORY", filepath.Join(m.home(s.GPUs[0], uid), mpsPipe)},
		{"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", fmt.Sprintf("0=%dM", s.GPUShareMiB)},
		{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", strconv.Itoa(pct)},
	}
}

// uidOf is the account a task's job runs as: its credential's, else the
// agent's own.
func uidOf(cred *credential) uint32 {
	if cred != nil {
		return cred.uid
	}
	return uint32(os.Geteuid())
}

// mpsDirOf is where a node's MPS daemons keep their directories:
// Config.MPSDir, else corral-mps-<hash of the state directory> in the
// system's temporary directory (not under the state directory, which
// jobs cannot enter).
func mpsDirOf(cfg Config) string {
	if cfg.MPSDir != "" {
		return cfg.MPSDir
	}
	h := fnv.New32a()
	h.Write([]byte(cfg.StateDir))
	return filepath.Join(os.TempDir(), fmt.Sprintf("corral-mps-%08x", h.Sum32()))
}

// prepareShare starts (or joins) the MPS daemon a share's task runs
// under; nothing for a task that asks for no share.
func (t *tasks) prepareShare(ctx context.Context, s api.TaskSpec, cred *credential) error {
	if s.GPUShareMiB <= 0 {
		return nil
	}
	if t.mps == nil {
		return errors.New("a GPU share needs a shared GPU, and this node has none (corral agent --shared-gpus)")
	}
	if len(s.GPUs) != 1 {
		return fmt.Errorf("a GPU share is of one GPU, not %d", len(s.GPUs))
	}
	uid, gid := uidOf(cred), uint32(os.Getegid())
	if cred != nil {
		gid = cred.gid
	}
	t.mu.Lock()
	uuid := t.uuids[s.GPUs[0]]
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, mpsStartTimeout)
	defer cancel()
	return t.mps.acquire(ctx, s.GPUs[0], uuid, uid, gid)
}

// mpsStartTimeout bounds the start of a shared GPU's MPS daemon (the
// control binary forks the daemon and returns at once): past it the
// share fails to start rather than hold up the node's other starts.
const mpsStartTimeout = 30 * time.Second

// releaseShares stops the MPS daemons of shared GPUs no running share
// uses.
func (t *tasks) releaseShares(ctx context.Context) {
	if t.mps == nil {
		return
	}
	inUse := map[int]bool{}
	t.mu.Lock()
	for _, tk := range t.byKey {
		if tk.exited == nil && tk.spec.GPUShareMiB > 0 {
			for _, g := range tk.spec.GPUs {
				inUse[g] = true
			}
		}
	}
	t.mu.Unlock()
	t.mps.release(ctx, inUse)
}
