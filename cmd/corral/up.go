package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/server"
	"github.com/corral-sched/corral/internal/store"
)

// version is Corral's version, reported by /orchestrator/status.
const version = "0.1.0-dev"

// Defaults of the daemon flags.
const (
	defaultListen  = "127.0.0.1:7450"
	defaultDataDir = ".corral"
)

// upFlags are the flags of `corral up`.
type upFlags struct {
	dataDir      string
	listen       string
	simulateGPUs string
	nodeName     string
	nodeTTL      time.Duration
	cancelGrace  time.Duration
	logFormat    string
	logLevel     string
}

// newUpCmd is `corral up`: server, in-process agent and embedded store.
func newUpCmd() *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the control plane, a local agent and the embedded store on this machine",
		Long: `corral up runs everything a single machine needs: the scheduler and its HTTP API,
an agent that runs jobs on this machine's GPUs, and the embedded SQLite store in
--data-dir. GPUs are found through NVML; without an NVIDIA driver, use
--simulate-gpus to try Corral with simulated GPUs (jobs run for real, only the
GPUs are pretend).`,
		Example: `  corral up --simulate-gpus 8            # 8 simulated H100s with 80 GB each
  corral up --simulate-gpus 4:A100:40     # 4 simulated A100s with 40 GB each
  corral up --listen 127.0.0.1:9000 --data-dir /var/lib/corral`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runUp(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir, "directory for the database and job logs")
	fl.StringVar(&f.listen, "listen", defaultListen, "HTTP address of the API")
	fl.StringVar(&f.simulateGPUs, "simulate-gpus", "", "offer simulated GPUs instead of real ones: N[:MODEL[:MEMGB[:TOPOLOGY]]], e.g. 8, 8:H100:80 or 8:A100:40:pairs (TOPOLOGY: nvlink, pairs, quads, none)")
	fl.StringVar(&f.nodeName, "node-name", "", "this node's id (default: the hostname)")
	fl.DurationVar(&f.nodeTTL, "node-ttl", 30*time.Second, "how long a silent node stays up (multi-node setups)")
	fl.DurationVar(&f.cancelGrace, "cancel-grace", 10*time.Second, "time a canceled job gets between SIGTERM and SIGKILL")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: use text or json", format)
}

// discover finds this machine's GPUs: simulated when asked, else through
// NVML. No GPUs is not an error; the reason is returned for the banner.
func discover(ctx context.Context, nodeID, simulate string) (src gpu.Source, devs []gpu.Device, why string, err error) {
	if simulate != "" {
		spec, err := gpu.ParseSimulateSpec(simulate)
		if err != nil {
			return nil, nil, "", usageError{err}
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

func runUp(ctx context.Context, f upFlags, stdout, stderr io.Writer) error {
	logger, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	dataDir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	release, err := store.Lock(dataDir)
	if err != nil {
		return err
	}
	defer release()

	nodeID := f.nodeName
	if nodeID == "" {
		if nodeID, err = os.Hostname(); err != nil || nodeID == "" {
			nodeID = "local"
		}
	}
	hostname, _ := os.Hostname()
	src, devs, why, err := discover(ctx, nodeID, f.simulateGPUs)
	if err != nil {
		return err
	}
	if src != nil {
		defer src.Close()
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	defer ln.Close()

	st, err := store.Open(ctx, filepath.Join(dataDir, "corral.db"))
	if err != nil {
		return err
	}
	defer st.Close()

	// The runner reports to the orchestrator, which is built after it.
	var o *orchestrator.Orchestrator
	runner := agent.NewRunner(logger, func(u exec.Update) { o.Sink(u) })
	o, err = orchestrator.New(ctx, orchestrator.Config{
		Store:    st,
		Executor: runner,
		Nodes:    []orchestrator.Node{{ID: nodeID, Hostname: hostname, Devices: devs, Telemetry: src, Simulated: f.simulateGPUs != ""}},
		DataDir:  dataDir,
		Reap: func(ids map[string]bool) (int, error) {
			return agent.KillStrays(logger, ids)
		},
		CancelGrace: f.cancelGrace,
		Logger:      logger,
		Version:     version,
	})
	if err != nil {
		return err
	}

	// Streaming handlers (logs -f) end when baseCtx does, so a shutdown does
	// not wait for them.
	baseCtx, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	srv := &http.Server{Handler: server.New(o, logger), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return baseCtx }}
	srv.RegisterOnShutdown(endStreams)
	loopCtx, stopLoop := context.WithCancel(context.WithoutCancel(ctx))
	loopDone := make(chan error, 1)
	go func() { loopDone <- o.Run(loopCtx) }()
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ln) }()

	printBanner(stdout, "http://"+ln.Addr().String(), nodeID, devs, why, f.simulateGPUs != "", dataDir)

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case runErr = <-loopDone:
		logger.Error("orchestrator stopped", "err", runErr)
	case runErr = <-srvDone:
		logger.Error("HTTP server stopped", "err", runErr)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutCtx)
	stopLoop()
	// Jobs run as children of this process and cannot outlive it: stop
	// them now; the next start records them as lost and requeues those
	// with retries left.
	if n := len(runner.Running()); n > 0 {
		logger.Info("stopping running jobs", "jobs", n, "grace", f.cancelGrace)
		stopCtx, cancelStop := context.WithTimeout(context.Background(), f.cancelGrace+5*time.Second)
		runner.StopAll(stopCtx, f.cancelGrace)
		cancelStop()
	}
	if errors.Is(runErr, http.ErrServerClosed) || errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	return runErr
}

func printBanner(w io.Writer, url, nodeID string, devs []gpu.Device, why string, simulated bool, dataDir string) {
	fmt.Fprintf(w, "Corral %s is up at %s\n", version, url)
	switch {
	case len(devs) == 0:
		fmt.Fprintf(w, "  node %s: no GPUs found (%s)\n", nodeID, why)
		fmt.Fprintf(w, "  jobs with --gpus 0 still run; to try Corral without GPUs: corral up --simulate-gpus 8\n")
	default:
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
		fmt.Fprintf(w, "  node %s: %d %s (%s)\n", nodeID, len(devs), kind, strings.Join(parts, "; "))
	}
	fmt.Fprintf(w, "  data: %s\n", dataDir)
	fmt.Fprintf(w, "  try:  corral submit --gpus 1 -- nvidia-smi -L   then   corral queue, corral jobs, corral nodes\n")
}
