package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/lazyre"
)

// envFlags are the environment flags of corral submit, run, alloc and
// notebook: what of the caller's environment the job gets (--export, as
// Slurm's sbatch), and variables of its own (--env-file, --env). The job's
// env is, each over the one before: the exported variables, the files'
// (in order), then --env's. The agent adds the account's identity and
// Corral's own on top (docs/jobs.md).
type envFlags struct {
	export string   // --export: ALL, NONE, or NAME[=VALUE] items, comma-separated
	env    []string // --env K=V (repeatable)
	files  []string // --env-file FILE (repeatable)
}

// exportDefault is --export's default: the caller's whole environment.
const exportDefault = "ALL"

func (e *envFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&e.export, "export", exportDefault, "what of your environment the job gets: ALL (all of it, less a few variables of this shell and Corral's own; docs/jobs.md), NONE (a login-like environment of the job's account), or names, e.g. PATH,HF_HOME (also NAME=VALUE, and ALL or NONE among them)")
	fl.StringArrayVar(&e.env, "env", nil, "environment variable K=V for the job (repeatable; wins over --export and --env-file)")
	fl.StringArrayVar(&e.files, "env-file", nil, "file of KEY=VALUE lines for the job's environment (# comments; repeatable; wins over --export)")
}

// envName is a name the API takes for a job's variable.
var envName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// notExported are the variables --export ALL leaves out: the state of the
// calling shell and of its session on this machine, which mean nothing on
// the node that runs the job (docs/jobs.md).
var notExported = map[string]bool{
	"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true, "HOSTNAME": true,
	"DISPLAY": true, "TMUX": true, "TMUX_PANE": true, "STY": true,
	"XDG_RUNTIME_DIR": true, "XDG_SESSION_ID": true, "DBUS_SESSION_BUS_ADDRESS": true,
	"SSH_AUTH_SOCK": true, "SSH_AGENT_PID": true, "SSH_CLIENT": true, "SSH_CONNECTION": true, "SSH_TTY": true,
}

// corralOwn reports whether k is Corral's own (its credentials, its
// settings, a parent job's CORRAL_* variables) or one it sets in every
// job: never exported, and refused by the API.
func corralOwn(k string) bool {
	return strings.HasPrefix(k, "CORRAL_") || k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES" || k == "CUDA_DEVICE_ORDER"
}

// maxExportedValue is the longest value --export ALL sends (the API's
// limit); a longer one is left out, with a warning.
const maxExportedValue = 32 << 10

// build returns the job's env from environ (the caller's environment,
// os.Environ()); warnings about what --export ALL left out go to warn.
func (e *envFlags) build(environ []string, warn io.Writer) (map[string]string, error) {
	caller := map[string]string{}
	var order []string
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := caller[k]; !dup {
				order = append(order, k)
			}
			caller[k] = v
		}
	}
	env := map[string]string{}
	all, none := false, false
	for _, item := range strings.Split(e.export, ",") {
		item = strings.TrimSpace(item)
		k, v, hasValue := strings.Cut(item, "=")
		switch {
		case item == "":
		case strings.EqualFold(item, "ALL"):
			all = true
		case strings.EqualFold(item, "NONE"):
			none = true
		case !envName.MatchString(k):
			return nil, usagef("--export %q: %q is not a variable name; want ALL, NONE or names such as PATH,HF_HOME", e.export, k)
		case corralOwn(k):
			return nil, usagef("--export: %s is Corral's own and set on the node", k)
		case hasValue:
			env[k] = v
		default:
			if cv, ok := caller[k]; ok {
				env[k] = cv
			}
		}
	}
	if all && none {
		return nil, usagef("--export %q: ALL and NONE exclude each other", e.export)
	}
	if all {
		for _, k := range order {
			v := caller[k]
			if _, named := env[k]; named || notExported[k] || corralOwn(k) || !envName.MatchString(k) {
				continue // named with a value, this shell's, Corral's, or a name the API refuses (BASH_FUNC_f%%)
			}
			if len(v) > maxExportedValue {
				fmt.Fprintf(warn, "corral: --export ALL: %s is left out (its value is over %d KiB)\n", k, maxExportedValue>>10)
				continue
			}
			env[k] = v
		}
	}
	for _, f := range e.files {
		if err := readEnvFile(f, caller, env); err != nil {
			return nil, err
		}
	}
	flags, err := cmdkit.ParseEnv("--env", e.env)
	if err != nil {
		return nil, err
	}
	for k, v := range flags {
		env[k] = v
	}
	if len(env) == 0 {
		return nil, nil
	}
	return env, nil
}

// readEnvFile adds the variables of an --env-file to env: KEY=VALUE lines
// (an "export " before KEY is allowed; a value in matching single or
// double quotes loses them; nothing else is interpreted), blank lines and
// # comments; a bare KEY takes the caller's value, as Docker's --env-file.
func readEnvFile(path string, caller, env map[string]string) error {
	f, err := os.Open(path)
	if err != nil {
		return usagef("--env-file: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, hasValue := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !envName.MatchString(k) {
			return usagef("--env-file %s:%d: want KEY=VALUE, not %q", path, n, truncateFor(line, 60))
		}
		if !hasValue {
			if cv, ok := caller[k]; ok {
				env[k] = cv
			}
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	if err := sc.Err(); err != nil {
		return usagef("--env-file %s: %v", path, err)
	}
	return nil
}

// truncateFor shortens s to n bytes for a message.
func truncateFor(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
