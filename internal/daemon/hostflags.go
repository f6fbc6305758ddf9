package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/cmdkit"
)

// hostFlags are the flags about what a daemon leaves on its host: how much
// of a job's output a log keeps (up, server, agent), which account runs
// the jobs of owners without one, and how much free disk a node needs to
// take new jobs (up, agent). docs/security.md describes them.
type hostFlags struct {
	maxLogSize    byteSize
	runAsFallback string
	minFreeDisk   percent
	jobEnvFrom    string // --job-env-from-agent (docs/jobs.md)
	scratchDir    string // --scratch-dir (docs/jobs.md)
}

// registerLogSize registers --max-log-size (up, server, agent).
func (h *hostFlags) registerLogSize(fl *pflag.FlagSet) {
	h.maxLogSize = agent.DefaultMaxLogSize
	fl.Var(&h.maxLogSize, "max-log-size", "bytes of output one attempt's log keeps, e.g. 1GiB, 500M, 0 for no cap; past it the output is dropped behind one marker line and the job goes on")
}

// registerNode registers --run-as-fallback and --min-free-disk (up, agent).
func (h *hostFlags) registerNode(fl *pflag.FlagSet) {
	h.minFreeDisk = 5
	fl.StringVar(&h.runAsFallback, "run-as-fallback", os.Getenv("CORRAL_RUN_AS_FALLBACK"), "with --run-as user: run the jobs of owners without a Unix account on this node as this account (e.g. nobody; never root) instead of failing them; default $CORRAL_RUN_AS_FALLBACK")
	fl.Var(&h.minFreeDisk, "min-free-disk", "take no new jobs while the disk of the job logs has less than this free, in percent (e.g. 5%; 0 turns the check off)")
	fl.StringVar(&h.jobEnvFrom, "job-env-from-agent", "", "comma-separated names of this daemon's own environment variables that every job gets (e.g. LANG,TZ); nothing else of its environment reaches a job (docs/jobs.md)")
	fl.StringVar(&h.scratchDir, "scratch-dir", "", "directory on the node's local disk for each attempt's private $TMPDIR ($CORRAL_SCRATCH), removed when the attempt ends (default /tmp/corral-scratch, or /tmp/corral-scratch-UID for a daemon not running as root; /tmp is $TMPDIR when set)")
}

// applyJobEnv sets the agent's --job-env-from-agent and --scratch-dir
// (up, agent).
func (h *hostFlags) applyJobEnv(cfg *agent.Config) error {
	names, err := agent.ParseJobEnvFromAgent(h.jobEnvFrom)
	if err != nil {
		return cmdkit.Usage(err)
	}
	cfg.JobEnvFromAgent, cfg.ScratchDir = names, h.scratchDir
	return nil
}

// byteSize is a flag of a number of bytes: 1048576, 512K, 100M, 1G, 1GiB
// (K, M, G, T are powers of 1024, with or without "iB" or "B").
type byteSize int64

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n > 0 && n%(int64(1)<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
func (b *byteSize) Type() string { return "size" }
func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// parseByteSize reads a byte count such as 1GiB, 500M or 4096.
func parseByteSize(s string) (int64, error) {
	n, ok := cmdkit.ParseSize(s, 1)
	if !ok || n > 1<<62 {
		return 0, fmt.Errorf("%q is not a size: use bytes or K, M, G, T (e.g. 1GiB, 500M)", s)
	}
	return int64(n), nil
}

// percent is a flag of a percentage, 0 to 100, with or without "%".
type percent float64

func (p *percent) String() string { return strconv.FormatFloat(float64(*p), 'g', -1, 64) + "%" }
func (p *percent) Type() string   { return "percent" }
func (p *percent) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v < 0 || v > 100 {
		return fmt.Errorf("%q is not a percentage from 0 to 100 (e.g. 5%%)", s)
	}
	*p = percent(v)
	return nil
}

// runAsWarning is what corral up says at start when its agent runs as
// root and the jobs of its own user (owner, the bootstrap admin's) would
// fail to start for want of a Unix account: what to pass. Empty otherwise.
func runAsWarning(owner, runAs, fallback string) string {
	if os.Geteuid() != 0 || agent.CheckOwner(owner, runAs, fallback) == nil {
		return ""
	}
	return fmt.Sprintf("  warning: this agent runs as root and user %s (the admin token's) has no Unix account here, so %s's jobs will fail to start:\n"+
		"           pass --run-as agent to run every job as root (a single-user machine), or --run-as-fallback ACCOUNT (e.g. nobody)\n", owner, owner)
}
