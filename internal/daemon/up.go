package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/exec/agents"
)

// version is this binary's version, which the daemons announce.
const version = cmdkit.Version

// Defaults of the daemon flags.
const (
	defaultListen  = "127.0.0.1:7450"
	defaultDataDir = ".corral"
)

// NewUpCmd is `corral up`: server, in-process agent and embedded store.
func NewUpCmd() *cobra.Command {
	var f controlFlags
	var simulate, nodeName string
	var labels []string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the control plane, a local agent and the embedded store on this machine",
		Long: `corral up runs everything a single machine needs: the scheduler and its HTTP API,
an agent that runs jobs on this machine's GPUs, and the embedded SQLite store in
--data-dir. GPUs are found through NVML; without an NVIDIA driver, use
--simulate-gpus to try Corral with simulated GPUs (jobs run for real, only the
GPUs are pretend). More machines can join with "corral agent --server URL".
Jobs of this machine's agent run under a shim host in its own session: they
outlive corral up (stopped with SIGTERM or killed), and the next corral up
on the same --data-dir adopts them with their logs and real exit codes, so
an upgrade in place loses no running work (docs/operations.md). The Go garbage
collector runs at GOGC=400 (less CPU, more memory), with a soft memory limit of
2.5 times the live heap (at least 400 MiB), unless $GOGC or $GOMEMLIMIT is set.`,
		Example: `  corral up --simulate-gpus 8            # 8 simulated H100s with 80 GB each
  corral up --simulate-gpus 4:A100:40     # 4 simulated A100s with 40 GB each
  corral up --listen 127.0.0.1:9000 --data-dir /var/lib/corral`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lbls, err := cmdkit.ParseEnv("--label", labels)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runControl(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr(), localAgent(f, simulate, nodeName, lbls))
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&simulate, "simulate-gpus", "", "offer simulated GPUs instead of real ones: N[:MODEL[:MEMGB[:TOPOLOGY]]], e.g. 8, 8:H100:80 or 8:A100:40:pairs (TOPOLOGY: nvlink, pairs, quads, none); a MIG layout last, e.g. 8:H100:80:mig=0-3:1g.10gb*7,4:3g.40gb+4g.40gb (docs/cluster.md#mig)")
	fl.StringVar(&nodeName, "node-name", "", "this node's id (default: the hostname)")
	fl.StringArrayVar(&labels, "label", nil, "a label of this node, K=V (repeatable); jobs can ask for it")
	runAsFlag(fl, &f.runAs)
	f.host.registerNode(fl)
	f.contain.register(fl)
	fl.StringVar(&f.notify.simFaults, "simulate-faults", "", simFaultsHelp)
	withConfigFile(cmd) // configfile.go
	return cmd
}

// localAgent is the in-process agent of `corral up`: it runs on this
// machine's GPUs and talks to the pool directly. Its jobs run under a
// shim host in its own session (Detach, Unfenced): they outlive the
// server, and the next `corral up` on the same data directory adopts them.
func localAgent(f controlFlags, simulate, nodeName string, labels map[string]string) *localNode {
	hostname, _ := os.Hostname()
	nodeID := nodeName
	if nodeID == "" {
		nodeID = hostname
	}
	if nodeID == "" {
		nodeID = "local"
	}
	start := func(ctx context.Context, pool *agents.Pool, logger *slog.Logger) (string, *agent.Agent, error) {
		src, devs, why, err := discover(ctx, nodeID, simulate)
		if err != nil {
			return "", nil, err
		}
		if err := applySimFaults(src, f.notify.simFaults); err != nil {
			return "", nil, err
		}
		if len(devs) > f.maxGPUs {
			return "", nil, cmdkit.Usagef("this node has %d GPUs, more than --max-gpus-per-node %d: raise it", len(devs), f.maxGPUs)
		}
		dataDir, _ := filepath.Abs(f.dataDir)
		cfg := agent.Config{
			NodeID: nodeID, Hostname: hostname, Address: "127.0.0.1", Labels: labels, GPUs: src,
			StateDir: filepath.Join(dataDir, "agent"), LogDir: filepath.Join(dataDir, "logs"),
			Link: inProcess{pool}, Detach: true, Unfenced: true, Interval: f.interval, Logger: logger, RunAs: f.runAs,
			RunAsFallback: f.host.runAsFallback, MaxLogSize: int64(f.host.maxLogSize), MinFreeDisk: float64(f.host.minFreeDisk),
		}
		if err := f.host.applyJobEnv(&cfg); err != nil {
			return "", nil, err
		}
		if err := f.contain.apply(&cfg); err != nil {
			return "", nil, err
		}
		a, err := agent.New(cfg)
		if err != nil {
			return "", nil, err
		}
		go func() {
			a.Run(ctx)
			if src != nil {
				src.Close()
			}
		}()
		self := cmdkit.SelfName()
		b := banner(nodeID, devs, why, simulate != "", self) + runAsWarning(bootstrapUser(), f.runAs, f.host.runAsFallback)
		switch {
		case len(devs) > 0 && simulate != "":
			b += fmt.Sprintf("  try:  %[1]s submit --gpus 2 -- 'echo $CUDA_VISIBLE_DEVICES'   then   %[1]s jobs, %[1]s logs JOB, %[1]s nodes\n", self)
		case len(devs) > 0:
			b += fmt.Sprintf("  try:  %[1]s submit --gpus 1 -- nvidia-smi -L   then   %[1]s queue, %[1]s jobs, %[1]s nodes\n", self)
		}
		return b, a, nil
	}
	return &localNode{id: nodeID, start: start}
}

// inProcess is the Link of the in-process agent: direct calls into the
// pool. Its logs are already where the server reads them.
type inProcess struct{ pool *agents.Pool }

func (l inProcess) Register(ctx context.Context, r api.AgentRegistration) (api.AgentConfig, error) {
	return l.pool.Register(ctx, r, "127.0.0.1")
}

func (l inProcess) Sync(ctx context.Context, r api.AgentReport) (api.AgentWork, error) {
	w, err := l.pool.Sync(ctx, r)
	if errors.Is(err, agents.ErrUnknownNode) {
		return w, fmt.Errorf("%w", agent.ErrUnknownNode)
	}
	return w, err
}

func (inProcess) ShipLog(context.Context, api.LogChunk) error { return nil }

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, cmdkit.Usagef("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, cmdkit.Usagef("--log-format %q: use text or json", format)
}

// discover finds this machine's GPUs: simulated when asked, else through
// NVML. No GPUs is not an error; the reason is returned for the banner.
func discover(ctx context.Context, nodeID, simulate string) (src gpu.Source, devs []gpu.Device, why string, err error) {
	if simulate != "" {
		spec, err := gpu.ParseSimulateSpec(simulate)
		if err != nil {
			return nil, nil, "", cmdkit.Usage(err)
		}
		src = gpu.NewSimulated(nodeID, spec)
	} else {
		src, err = gpu.OpenNVML()
		if err != nil {
			return nil, nil, err.Error(), nil
		}
	}
	devs, err = src.Devices(ctx)
	if err != nil {
		src.Close()
		return nil, nil, fmt.Sprintf("listing GPUs failed: %v", err), nil
	}
	if len(devs) == 0 {
		return src, nil, "NVML reports no GPUs on this machine", nil
	}
	return src, devs, "", nil
}

// banner describes the local node's GPUs for the start-up message; its
// suggestions name the binary self (selfName).
func banner(nodeID string, devs []gpu.Device, why string, simulated bool, self string) string {
	var b strings.Builder
	if len(devs) == 0 {
		fmt.Fprintf(&b, "  node %s: no GPUs found (%s)\n", nodeID, why)
		fmt.Fprintf(&b, "  jobs with --gpus 0 still run; to try Corral without GPUs: %s up --simulate-gpus 8\n", self)
		return b.String()
	}
	kind := "GPUs"
	if simulated {
		kind = "simulated GPUs"
	}
	models := map[string]int{}
	var order []string
	for _, d := range devs {
		key := fmt.Sprintf("%s, %.0f GB", d.Model, float64(d.MemoryMiB)/1024)
		if models[key] == 0 {
			order = append(order, key)
		}
		models[key]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d x %s", models[k], k))
	}
	fmt.Fprintf(&b, "  node %s: %d %s (%s)\n", nodeID, len(devs), kind, strings.Join(parts, "; "))
	return b.String()
}
