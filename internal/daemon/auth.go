package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/feature/sizes"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/server"
	"github.com/corral-sched/corral/internal/store"
)

// Defaults of the limits (docs/security.md).
const (
	defaultSubmitRate       = 10     // submissions a second per user
	defaultSubmitBurst      = 100    // submissions at once per user
	defaultMaxQueuedPerUser = 1000   // queued jobs per user
	defaultMaxQueueSize     = 100000 // queued jobs in all: a bound on the server's memory (about 2-4 KB a job)
)

// accessFlags are the flags of `corral up` and `corral server` about
// access: the metrics switch and the limits.
type accessFlags struct {
	fs               *pflag.FlagSet
	publicMetrics    bool
	submitRate       float64
	submitBurst      int
	maxQueuedPerUser int
	maxQueueSize     int
	maxGPUsPerJob    int
	maxRunTime       time.Duration
	auditRetention   time.Duration
	maxArraySize     int // tasks of one job array (docs/arrays.md)
	// Interactive work (docs/interactive.md).
	maxInteractiveGPUs int
	maxInteractiveTime time.Duration
	// Sizes (docs/security.md): bytes of a job's command and env, and of
	// one user's jobs not ended.
	maxCommandBytes, maxEnvBytes, maxUserBytes int64
}

func (f *accessFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.fs = fl
	fl.BoolVar(&f.publicMetrics, "public-metrics", false, "serve /metrics without a token (for a Prometheus scraper on a trusted network)")
	fl.Float64Var(&f.submitRate, "submit-rate", defaultSubmitRate, "submissions a second each user may make, sustained (0: no limit; admins are exempt)")
	fl.IntVar(&f.submitBurst, "submit-burst", defaultSubmitBurst, "submissions each user may make at once, above --submit-rate")
	fl.IntVar(&f.maxQueuedPerUser, "max-queued-per-user", defaultMaxQueuedPerUser, "queued jobs one user may have (0: no limit; admins are exempt)")
	fl.IntVar(&f.maxQueueSize, "max-queue-size", defaultMaxQueueSize, "queued jobs in all (0: no limit; default $CORRAL_MAX_QUEUE_SIZE when set)")
	fl.IntVar(&f.maxGPUsPerJob, "max-gpus-per-job", 0, "GPUs one job may ask for, all nodes together (0: as many as the cluster has)")
	cmdkit.DurationVar(fl, &f.maxRunTime, "max-run-time", 0, "the longest a job may run: its default and largest time_limit; past it a job is stopped with reason time_limit (0: no limit)")
	fl.IntVar(&f.maxArraySize, "max-array-size", api.DefaultMaxArraySize, "tasks one job array may have (--array); each task also counts toward --max-queued-per-user and --max-queue-size")
	fl.IntVar(&f.maxInteractiveGPUs, "max-interactive-gpus", orchestrator.DefaultMaxInteractiveGPUs, "GPUs of interactive jobs (classes interactive and interactive-preemptible) and holds one user may have queued, running or held; more are refused at submission (0: no limit)")
	cmdkit.DurationVar(fl, &f.maxInteractiveTime, "max-interactive-time", orchestrator.DefaultMaxInteractiveTime, "the longest an interactive job or hold may last: its default time_limit (or duration) and the largest it may ask (0: no limit)")
	fl.Int64Var(&f.maxCommandBytes, "max-command-bytes", sizes.DefaultMaxCommandBytes, "bytes one job's command may have (0: no limit but the 1 MiB body)")
	fl.Int64Var(&f.maxEnvBytes, "max-env-bytes", sizes.DefaultMaxEnvBytes, "bytes one job's env may have, names and values together (0: no limit but the 1 MiB body)")
	fl.Int64Var(&f.maxUserBytes, "max-queued-bytes-per-user", sizes.DefaultMaxUserQueuedBytes, "bytes of commands, env and names one user's jobs that have not ended may hold in all (0: no limit; admins are exempt)")
	cmdkit.DurationVar(fl, &f.auditRetention, "audit-retention", 0, "how long audit entries are kept, e.g. 2160h for 90 days; older ones are deleted hourly (0: kept for ever)")
}

// limits are the orchestrator's limits from the flags and
// $CORRAL_MAX_QUEUE_SIZE (the flag wins).
func (f *accessFlags) limits() (orchestrator.Limits, error) {
	size := f.maxQueueSize
	if v := os.Getenv("CORRAL_MAX_QUEUE_SIZE"); v != "" && (f.fs == nil || !f.fs.Changed("max-queue-size")) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return orchestrator.Limits{}, cmdkit.Usagef("CORRAL_MAX_QUEUE_SIZE %q: want a whole number, 0 for no limit", v)
		}
		size = n
	}
	switch {
	case size < 0 || f.maxQueuedPerUser < 0 || f.maxGPUsPerJob < 0 || f.maxRunTime < 0:
		return orchestrator.Limits{}, cmdkit.Usagef("--max-queue-size, --max-queued-per-user, --max-gpus-per-job and --max-run-time must not be negative")
	case f.submitRate < 0 || f.submitBurst < 0:
		return orchestrator.Limits{}, cmdkit.Usagef("--submit-rate and --submit-burst must not be negative")
	case f.maxInteractiveGPUs < 0 || f.maxInteractiveTime < 0:
		return orchestrator.Limits{}, cmdkit.Usagef("--max-interactive-gpus and --max-interactive-time must not be negative")
	case f.maxCommandBytes < 0 || f.maxEnvBytes < 0 || f.maxUserBytes < 0:
		return orchestrator.Limits{}, cmdkit.Usagef("--max-command-bytes, --max-env-bytes and --max-queued-bytes-per-user must not be negative")
	case f.auditRetention < 0:
		return orchestrator.Limits{}, cmdkit.Usagef("--audit-retention must not be negative")
	case f.fs != nil && f.maxArraySize < 1:
		return orchestrator.Limits{}, cmdkit.Usagef("--max-array-size must be 1 or more")
	}
	return orchestrator.Limits{MaxQueueSize: size, MaxQueuedPerUser: f.maxQueuedPerUser,
		MaxGPUsPerJob: f.maxGPUsPerJob, MaxRunTime: f.maxRunTime, MaxArraySize: f.maxArraySize,
		MaxInteractiveGPUs: f.maxInteractiveGPUs, MaxInteractiveTime: f.maxInteractiveTime,
		MaxCommandBytes: offIfZero(f.maxCommandBytes), MaxEnvBytes: offIfZero(f.maxEnvBytes), MaxUserQueuedBytes: offIfZero(f.maxUserBytes)}, nil
}

// serverOptions adds the access options to opts.
func (f *accessFlags) serverOptions(opts ...server.Option) []server.Option {
	opts = append(opts, server.WithSubmitRate(f.submitRate, f.submitBurst))
	if f.publicMetrics {
		opts = append(opts, server.WithPublicMetrics())
	}
	return opts
}

// auditPruneEvery is how often entries past --audit-retention are deleted.
const auditPruneEvery = time.Hour

// pruneAudit deletes audit entries older than retention, at once and then
// every auditPruneEvery, until ctx ends. It does nothing when retention is
// 0 (entries are kept for ever).
func pruneAudit(ctx context.Context, st *store.Store, retention time.Duration, logger *slog.Logger) {
	if retention <= 0 {
		return
	}
	t := time.NewTicker(auditPruneEvery)
	defer t.Stop()
	for {
		n, err := st.PruneAudit(ctx, time.Now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("audit entries not pruned", "err", err)
		case n > 0:
			logger.Info("audit entries pruned", "deleted", n, "older_than", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// bootstrapAdmin is the admin token a server starts with.
type bootstrapAdmin struct {
	secret  string
	user    string
	path    string // the file it is kept in; "" when it came from $CORRAL_ADMIN_TOKEN
	created bool   // made at this start
	revoked bool   // revoked through the API: it does not work
}

// setUpAuth opens the token service and installs the bootstrap admin
// token: $CORRAL_ADMIN_TOKEN when set, else the one in
// <data-dir>/admin.token, made (mode 0600) on first start.
func setUpAuth(ctx context.Context, st *store.Store, dataDir string, logger *slog.Logger) (*auth.Service, bootstrapAdmin, error) {
	svc, err := auth.New(ctx, st, nil)
	if err != nil {
		return nil, bootstrapAdmin{}, err
	}
	a := bootstrapAdmin{user: bootstrapUser()}
	if t := strings.TrimSpace(os.Getenv("CORRAL_ADMIN_TOKEN")); t != "" {
		a.secret = t
	} else {
		a.path = filepath.Join(dataDir, "admin.token")
		if a.secret, a.created, err = readOrMakeSecret(a.path); err != nil {
			return nil, a, err
		}
	}
	switch err := svc.Bootstrap(ctx, a.secret, a.user); {
	case errors.Is(err, auth.ErrBootstrapRevoked):
		a.revoked = true
		logger.Warn(err.Error())
	case err != nil:
		return nil, a, fmt.Errorf("admin token: %w", err)
	}
	return svc, a, nil
}

// bootstrapUser is the user of the bootstrap admin token: the account
// that runs the server, $SUDO_USER or "admin" when that is root. Jobs the
// local CLI submits with it are that user's.
func bootstrapUser() string {
	if os.Geteuid() == 0 {
		// Not "root": an agent running as root never runs a job as root
		// unless told to (--run-as agent).
		if u := os.Getenv("SUDO_USER"); u != "" && auth.ValidName(u) {
			return u
		}
		return "admin"
	}
	if u, err := user.Current(); err == nil && auth.ValidName(u.Username) {
		return u.Username
	}
	return "admin"
}

// readOrMakeSecret reads the secret kept in path, or makes one and keeps
// it there (mode 0600).
func readOrMakeSecret(path string) (secret string, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("admin token: %w", err)
	}
	if secret, err = auth.NewSecret(); err != nil {
		return "", false, err
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("admin token: %w", err)
	}
	return secret, true, nil
}

// announce says where the admin token is. For `corral up` (local) it also
// saves the token in the client config for this server's address, so the
// CLI on this machine needs no setup, and prints the dashboard's sign-in
// link.
func (a bootstrapAdmin) announce(w io.Writer, scheme, addr, dataDir string, local bool, logger *slog.Logger) {
	if a.revoked {
		fmt.Fprintf(w, "  admin token: revoked (remove %s and restart for a new one)\n", orEnv(a.path))
		return
	}
	url := client.LocalURL(scheme, addr)
	switch {
	case a.created:
		fmt.Fprintf(w, "  admin token (user %s): made and kept in %s (mode 0600)\n", a.user, a.path)
	default:
		fmt.Fprintf(w, "  admin token (user %s): %s\n", a.user, orEnv(a.path))
	}
	if !local {
		fmt.Fprintf(w, "  clients: CORRAL_SERVER=%s CORRAL_TOKEN=<a token; make more with %s token create>\n", url, cmdkit.SelfName())
		return
	}
	path, err := client.SaveServer(url, client.ServerConfig{Token: a.secret, DataDir: dataDir})
	if err != nil {
		logger.Warn("could not save the admin token for the local CLI; set CORRAL_TOKEN", "err", err)
	} else {
		fmt.Fprintf(w, "  the corral CLI on this machine uses it (saved in %s)\n", path)
	}
	fmt.Fprintf(w, "  dashboard: %s/?token=%s\n", url, a.secret)
}

func orEnv(path string) string {
	if path == "" {
		return "$CORRAL_ADMIN_TOKEN"
	}
	return path
}

// runAsFlag registers --run-as (up, agent): whose account jobs run under.
// Its default is $CORRAL_RUN_AS, else "user".
func runAsFlag(fl *pflag.FlagSet, v *string) {
	def := os.Getenv("CORRAL_RUN_AS")
	if def == "" {
		def = agent.RunAsUser
	}
	fl.StringVar(v, "run-as", def, "whose account jobs run under when the agent is root: user (the job's owner's Unix account; never root: a job whose owner has no account fails to start unless --run-as-fallback names one; strict is a synonym) or agent (the agent's own account, root included: a single-user machine); default $CORRAL_RUN_AS, else user")
}

// offIfZero maps a size flag's 0 (no limit) to the orchestrator's
// negative (its 0 is the default).
func offIfZero(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}
