package daemon

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/ray"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// rayFlags are the Ray executor's flags (--executor ray; docs/ray.md).
type rayFlags struct {
	address      string
	tokenFile    string
	poll         time.Duration
	failures     int
	reset        time.Duration
	maxReset     time.Duration
	stopWaitFlag time.Duration
}

func (f *rayFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.address, "ray-address", "", "with --executor ray: the Ray head's dashboard URL, e.g. http://head:8265 (default: $RAY_ADDRESS)")
	fl.StringVar(&f.tokenFile, "ray-auth-token-file", "", "with --executor ray: a file holding Ray's auth token (RAY_AUTH_MODE=token clusters); default: $RAY_AUTH_TOKEN")
	cmdkit.DurationVar(fl, &f.poll, "ray-poll", time.Second, "with --executor ray: how often the Ray head is asked for its nodes and the jobs' states and logs")
	fl.IntVar(&f.failures, "ray-breaker-failures", 3, "with --executor ray: failed calls in a row that open the circuit breaker (the Ray nodes go down; jobs stay queued)")
	cmdkit.DurationVar(fl, &f.reset, "ray-breaker-reset", 5*time.Second, "with --executor ray: how long the open breaker waits before probing the head again (doubling after each failed probe)")
	cmdkit.DurationVar(fl, &f.maxReset, "ray-breaker-max-reset", time.Minute, "with --executor ray: the longest wait between probes")
	cmdkit.DurationVar(fl, &f.stopWaitFlag, "ray-stop-wait", 0, "with --executor ray: RAY_JOB_STOP_WAIT_TIME_S of every Ray job, SIGTERM to SIGKILL when stopped (default: --cancel-grace)")
}

// token is Ray's auth token: the file's, else $RAY_AUTH_TOKEN.
func (f *rayFlags) token() (string, error) {
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return "", cmdkit.Usagef("--ray-auth-token-file: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return strings.TrimSpace(os.Getenv("RAY_AUTH_TOKEN")), nil
}

// executor builds the Ray executor from the flags.
func (f *rayFlags) executor(book ray.NodeBook, sink exec.Sink, cancelGrace time.Duration, maxLog int64, logger *slog.Logger) (*ray.Executor, error) {
	addr := f.address
	if addr == "" {
		addr = os.Getenv("RAY_ADDRESS")
	}
	if addr == "" {
		return nil, cmdkit.Usagef("--executor ray needs --ray-address (or $RAY_ADDRESS): the Ray head's dashboard, e.g. http://head:8265")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr // as Ray's own job CLI takes head:8265
	}
	if f.poll <= 0 || f.failures < 1 || f.reset <= 0 || f.maxReset < f.reset || f.stopWaitFlag < 0 {
		return nil, cmdkit.Usagef("--ray-poll, --ray-breaker-failures and --ray-breaker-reset must be positive, --ray-breaker-max-reset at least the reset, --ray-stop-wait not negative")
	}
	token, err := f.token()
	if err != nil {
		return nil, err
	}
	wait := f.stopWaitFlag
	if wait == 0 {
		wait = cancelGrace
	}
	e, err := ray.New(ray.Config{Address: addr, Token: token, Sink: sink, Book: book, Pool: api.PoolRay, Poll: f.poll, StopWait: wait,
		Breaker: breaker.Config{Threshold: f.failures, Reset: f.reset, MaxReset: f.maxReset}, MaxLogSize: maxLog, Logger: logger})
	if err != nil {
		return nil, cmdkit.Usagef("--ray-address: %v", err)
	}
	return e, nil
}

// rayBook hands the Ray executor's node news to the orchestrator once it
// exists.
type rayBook struct{ o **orchestrator.Orchestrator }

func (b rayBook) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	return (*b.o).RegisterNode(ctx, reg, addr)
}

func (b rayBook) NodeSeen(id string, r []api.GPUReading, f []api.ForeignProcess, at time.Time) {
	(*b.o).NodeSeen(id, r, f, at)
}

func (b rayBook) NodeDown(id string, at time.Time) { (*b.o).NodeDown(id, at) }
