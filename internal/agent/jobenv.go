package agent

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/lazyre"
)

// A job's environment is the submitter's, never the agent's (docs/jobs.md).
// The agent builds it in five layers, each over the one before:
//
//  1. the agent's own variables an admin names (Config.JobEnvFromAgent,
//     --job-env-from-agent LANG,TZ), and nothing else of the agent's;
//  2. a login-like base for the job's account, where layer 1 left them
//     unset: HOME, USER, LOGNAME and SHELL from its passwd entry, and a
//     default PATH;
//  3. the job's env (what corral submit sent: --export, --env-file, --env);
//  4. for a job run as another account than the agent's: that account's
//     HOME, USER, LOGNAME and SHELL again, whatever the job's env said;
//  5. Corral's own: CUDA_VISIBLE_DEVICES, CORRAL_*, MASTER_*, and the
//     attempt's scratch directory as TMPDIR and CORRAL_SCRATCH.
//
// The command runs under bash -c where the node has bash, else sh -c
// (jobArgv), so that `source` and `set -o pipefail` work.

// jobEnv is what the agent adds to every job's environment, fixed when the
// agent starts (newJobEnv).
type jobEnv struct {
	fromAgent []string // KEY=VALUE: the agent's variables named by --job-env-from-agent
	self      identity // the agent's own account, for jobs run as it
	scratch   string   // this agent's scratch directory (prepareScratch); "": no scratch
	shell     string   // the shell of job commands; "": found at use (jobShell)
}

// identity is an account's part of a job's environment.
type identity struct{ name, home, shell string }

// defaultPath is a job's PATH when nothing sets one: Debian's login PATH,
// with the sbin directories for root.
const (
	defaultPath     = "/usr/local/bin:/usr/bin:/bin"
	defaultRootPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// envNameRE is a variable name an agent may pass on.
var envNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseJobEnvFromAgent checks --job-env-from-agent: a comma-separated list
// of variable names, none of them Corral's own (CORRAL_*, whose tokens
// must never reach a job) or one Corral sets (CUDA_VISIBLE_DEVICES, ...).
func ParseJobEnvFromAgent(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			continue
		case !envNameRE.MatchString(n):
			return nil, fmt.Errorf("--job-env-from-agent: %q is not a variable name", n)
		case strings.HasPrefix(n, "CORRAL_") || n == "CUDA_VISIBLE_DEVICES" || n == "NVIDIA_VISIBLE_DEVICES" || n == "TMPDIR":
			return nil, fmt.Errorf("--job-env-from-agent: %s is Corral's to set, not the agent's to pass on", n)
		}
		names = append(names, n)
	}
	return names, nil
}

// newJobEnv resolves what every job's environment takes from the agent
// (cfg.JobEnvFromAgent, its account). The scratch directory is prepared
// when the agent runs (prepareScratch).
func newJobEnv(cfg Config) (jobEnv, error) {
	var e jobEnv
	for _, n := range cfg.JobEnvFromAgent {
		if _, err := ParseJobEnvFromAgent(n); err != nil {
			return e, err
		}
		if v, ok := os.LookupEnv(n); ok {
			e.fromAgent = append(e.fromAgent, n+"="+v)
		}
	}
	e.self = selfIdentity()
	e.shell = jobShell()
	return e, nil
}

// selfIdentity is the agent's own account: HOME as its environment says
// (a service's HOME may differ from its passwd entry), the rest from its
// passwd entry.
func selfIdentity() identity {
	id := identity{home: os.Getenv("HOME")}
	if u, err := user.Current(); err == nil {
		id.name = u.Username
		if id.home == "" {
			id.home = u.HomeDir
		}
	}
	id.shell = loginShell(id.name)
	return id
}

// loginShell is the login shell of account name: its passwd entry's
// (/etc/passwd, else getent for accounts from a directory service), or
// /bin/sh.
func loginShell(name string) string {
	if name == "" {
		return "/bin/sh"
	}
	if f, err := os.Open("/etc/passwd"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if sh, ok := passwdShell(sc.Text(), name); ok {
				return sh
			}
		}
	}
	if out, err := osexec.Command("getent", "passwd", name).Output(); err == nil {
		if sh, ok := passwdShell(strings.TrimSpace(string(out)), name); ok {
			return sh
		}
	}
	return "/bin/sh"
}

// passwdShell reads the shell of a passwd line if it is name's.
func passwdShell(line, name string) (string, bool) {
	f := strings.Split(line, ":")
	if len(f) < 7 || f[0] != name {
		return "", false
	}
	if f[6] == "" {
		return "/bin/sh", true // passwd(5): empty means /bin/sh
	}
	return f[6], true
}

// jobShell is the shell job commands run under: bash where the node has
// it, else sh.
func jobShell() string {
	for _, p := range []string{"/bin/bash", "/usr/bin/bash"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return "/bin/sh"
}

// shimEnv is a shim's own environment: the agent's, less its credentials
// (the job's is given to the shim apart: --env-stdin, shimJob.Env).
func shimEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return credentialVar(k)
	})
}

// jobArgv is the argv that runs a job's (or a task's) shell command.
func (t *tasks) jobArgv(command string) []string {
	sh := t.shell
	if sh == "" {
		sh = jobShell()
	}
	return []string{sh, "-c", command}
}

// env is the job's environment (the layers above), as KEY=VALUE.
func (t *tasks) env(s api.TaskSpec, cred *credential) []string {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	setDefault := func(k, v string) {
		if _, ok := vals[k]; !ok && v != "" {
			set(k, v)
		}
	}
	// 1. What the admin passes on from the agent.
	for _, kv := range t.fromAgent {
		if k, v, ok := strings.Cut(kv, "="); ok && !credentialVar(k) {
			set(k, v)
		}
	}
	// 2. A login-like base for the job's account.
	id, path := t.self, defaultPath
	if cred != nil {
		id = identity{name: cred.name, home: cred.home, shell: cred.shell}
	} else if os.Geteuid() == 0 {
		path = defaultRootPath
	}
	if id.shell == "" {
		id.shell = "/bin/sh"
	}
	setDefault("HOME", id.home)
	setDefault("USER", id.name)
	setDefault("LOGNAME", id.name)
	setDefault("SHELL", id.shell)
	setDefault("PATH", path)
	// 3. The job's own.
	for k, v := range s.Env {
		set(k, v)
	}
	// 4. Another account's identity is its own.
	if cred != nil {
		set("HOME", id.home)
		set("USER", id.name)
		set("LOGNAME", id.name)
		set("SHELL", id.shell)
	}
	// 5. Corral's.
	gpus := make([]string, len(s.GPUs))
	for i, g := range s.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	visible := strings.Join(gpus, ",")
	nvidia := visible
	if len(s.GPUs) == 0 {
		nvidia = "void"
	}
	master := s.MasterAddr
	if master == "" {
		master = "127.0.0.1"
	}
	for _, kv := range [][2]string{
		{"CUDA_VISIBLE_DEVICES", visible}, {"NVIDIA_VISIBLE_DEVICES", nvidia}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
		{"CORRAL_JOB_ID", s.JobID}, {"CORRAL_GPUS", visible}, {"CORRAL_GPU_UUIDS", strings.Join(s.GPUUUIDs, ",")},
		{"CORRAL_ATTEMPT", strconv.Itoa(s.Attempt)}, {"CORRAL_NODE_ID", t.nodeID},
		{"CORRAL_NUM_GPUS", strconv.Itoa(len(s.GPUs))}, // the GPUs granted on this node (elastic jobs: from min to max)
		{"CORRAL_NODE_RANK", strconv.Itoa(s.Rank)}, {"CORRAL_NUM_NODES", strconv.Itoa(max(s.NumNodes, 1))},
		{"CORRAL_MASTER_ADDR", master}, {"CORRAL_MASTER_PORT", strconv.Itoa(s.MasterPort)},
		{"MASTER_ADDR", master}, {"MASTER_PORT", strconv.Itoa(s.MasterPort)}, {"NODE_RANK", strconv.Itoa(s.Rank)},
		{"CORRAL_PREEMPT_NOTICE", t.noticeOf(keyOf(s))},
	} {
		set(kv[0], kv[1])
	}
	if dir := t.scratchOf(keyOf(s)); dir != "" {
		set("TMPDIR", dir)
		set("CORRAL_SCRATCH", dir)
	}
	if t.server != "" {
		set(serverVar, t.server)
	}
	for _, kv := range t.mps.shareEnv(s, uidOf(cred)) { // an MPS share (mps.go)
		set(kv[0], kv[1])
	}
	if mig := t.migOf(s); mig != "" {
		set("CORRAL_MIG_DEVICES", mig)
		if len(s.MIGDevices) > 0 { // slices placed as units: CUDA sees those alone
			set("CUDA_VISIBLE_DEVICES", mig)
		}
	}
	env := make([]string, len(order))
	for i, k := range order {
		env[i] = k + "=" + vals[k]
	}
	return env
}

// Scratch: each attempt's rank gets a private directory on the node's
// local disk, its $TMPDIR and $CORRAL_SCRATCH:
// SCRATCH-DIR/AGENT/JOB.ATTEMPT.RANK, owned by the job's account, mode
// 0700, made before the job starts and removed when the task ends (also
// when an agent that adopted it sees it end). SCRATCH-DIR (--scratch-dir;
// default: the system's temporary directory's corral-scratch, with the
// agent's uid when it is not root) and AGENT (the node's name and a hash
// of the agent's state directory, so that two agents of one machine never
// share one) belong to the agent's account, mode 0711: others may pass
// through but not list or write them.

// DefaultScratchDir is --scratch-dir's default for an agent of effective
// uid euid.
func DefaultScratchDir(euid int) string {
	if euid == 0 {
		return filepath.Join(os.TempDir(), "corral-scratch")
	}
	return filepath.Join(os.TempDir(), "corral-scratch-"+strconv.Itoa(euid))
}

// prepareScratch makes (or checks) the scratch directory dir (empty: the
// default) and this agent's directory in it, and returns the latter.
func prepareScratch(dir, nodeID, stateDir string) (string, error) {
	if dir == "" {
		dir = DefaultScratchDir(os.Geteuid())
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--scratch-dir: %w", err)
	}
	sum := sha256.Sum256([]byte(stateDir))
	name := strings.Map(func(r rune) rune {
		if r == '/' || r < ' ' {
			return '_'
		}
		return r
	}, nodeID)
	own := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:4]))
	for _, d := range []string{dir, own} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return "", fmt.Errorf("--scratch-dir: %w", err)
		}
		if err := checkScratchDir(d); err != nil {
			return "", fmt.Errorf("--scratch-dir: %w", err)
		}
	}
	return own, nil
}

// checkScratchDir checks that d is a directory (not a link) of the
// agent's own account that no one else may write, and makes it 0711.
func checkScratchDir(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s must be a directory of the agent's own account (uid %d), not a link or another's: choose another with --scratch-dir", d, os.Geteuid())
	}
	if fi.Mode().Perm() != 0o711 {
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	return nil
}

// scratchOf is task k's scratch directory; "": none.
func (t *tasks) scratchOf(k taskKey) string {
	if t.scratch == "" {
		return ""
	}
	return filepath.Join(t.scratch, k.dirName())
}

// makeScratch makes task k's scratch directory afresh, owned by cred's
// account (nil: the agent's), mode 0700.
func (t *tasks) makeScratch(k taskKey, cred *credential) error {
	dir := t.scratchOf(k)
	if dir == "" {
		return nil
	}
	if err := os.Mkdir(dir, 0o700); errors.Is(err, fs.ErrExist) {
		// Left by an agent that died before it recorded the task.
		os.RemoveAll(dir)
		err = os.Mkdir(dir, 0o700)
		if err != nil {
			return fmt.Errorf("scratch directory: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.Remove(dir)
		return fmt.Errorf("scratch directory: %w", err)
	}
	if cred != nil {
		if err := os.Lchown(dir, int(cred.uid), int(cred.gid)); err != nil {
			os.Remove(dir)
			return fmt.Errorf("scratch directory: %w", err)
		}
	}
	return nil
}

// removeScratch removes task k's scratch directory and all in it (the
// job's processes are gone). os.RemoveAll follows no link the job left.
func (t *tasks) removeScratch(k taskKey) {
	if dir := t.scratchOf(k); dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			t.log.Warn("scratch directory not removed", "job_id", k.job, "dir", dir, "err", err)
		}
	}
}

// sweepScratch removes the scratch directories of tasks this agent does
// not know (their records are gone): called once the previous agent's
// tasks are adopted, before new ones start.
func (t *tasks) sweepScratch() {
	if t.scratch == "" {
		return
	}
	entries, err := os.ReadDir(t.scratch)
	if err != nil {
		return
	}
	known := map[string]bool{}
	t.mu.Lock()
	for k := range t.byKey {
		known[k.dirName()] = true
	}
	t.mu.Unlock()
	for _, e := range entries {
		if !known[e.Name()] {
			os.RemoveAll(filepath.Join(t.scratch, e.Name()))
		}
	}
}
