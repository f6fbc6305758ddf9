package daemon

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/store"
)

// NewAgentCmd is `corral agent`: runs the jobs the server places on this
// node.
func NewAgentCmd() *cobra.Command {
	var (
		server, nodeName, dataDir, simulate, address, caFile, tokenFile string
		simForeign                                                      string
		logFormat, logLevel, runAs                                      string
		labels                                                          []string
		interval                                                        time.Duration
		host                                                            hostFlags
		contain                                                         containFlags
		simFaults                                                       string // notifyflags.go
	)
	var login agentLoginFlags // agentlogin.go
	cmd := &cobra.Command{
		Use:   "agent --server URL",
		Short: "Run this node's agent: register its GPUs with a server and run the jobs placed here",
		Long: `corral agent registers this machine's GPUs (NVML, or --simulate-gpus) with a
corral server, reports their telemetry, and runs the jobs the server places
here. Jobs run under a small supervisor (corral shim) in their own session, so
they survive an agent restart: the new agent adopts them and their logs.

The agent presents the server's join token: $CORRAL_JOIN_TOKEN, or the file
named by --join-token-file.`,
		Example: `  CORRAL_JOIN_TOKEN=$(cat /var/lib/corral/join.token) corral agent --server http://head:7450
  corral agent --server https://head:7450 --ca-file ca.pem --label rack=r2 --simulate-gpus 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(cmd.ErrOrStderr(), logFormat, logLevel)
			if err != nil {
				return err
			}
			if server == "" {
				server = os.Getenv("CORRAL_SERVER")
			}
			if server == "" {
				return cmdkit.Usagef("--server is required (or set CORRAL_SERVER)")
			}
			lbls, err := cmdkit.ParseEnv("--label", labels)
			if err != nil {
				return err
			}
			token := strings.TrimSpace(os.Getenv("CORRAL_JOIN_TOKEN"))
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--join-token-file: %w", err)
				}
				token = strings.TrimSpace(string(b))
			}
			if token == "" {
				return cmdkit.Usagef("no join token: set CORRAL_JOIN_TOKEN or --join-token-file (the server keeps it in <data-dir>/join.token)")
			}
			hostname, _ := os.Hostname()
			if nodeName == "" {
				nodeName = hostname
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			src, devs, why, err := discover(ctx, nodeName, simulate)
			if err != nil {
				return err
			}
			if src != nil {
				defer src.Close()
			}
			if err := applySimFaults(src, simFaults); err != nil {
				return err
			}
			if simForeign != "" {
				fs, ok := src.(interface{ SetForeignFile(string) })
				if !ok {
					return cmdkit.Usagef("--simulate-foreign needs --simulate-gpus")
				}
				fs.SetForeignFile(simForeign)
			}
			link, err := agent.NewHTTPLink(server, token, caFile)
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(dataDir)
			if err != nil {
				return fmt.Errorf("--data-dir: %w", err)
			}
			// Two agents on one state directory would both run its jobs.
			release, err := store.Lock(dir)
			if err != nil {
				return fmt.Errorf("--data-dir: %w", err)
			}
			defer release()
			if err := store.SecureDataDir(dir, "logs", "state"); err != nil {
				return fmt.Errorf("--data-dir %s: %w", dir, err)
			}
			cfg := agent.Config{
				NodeID: nodeName, Hostname: hostname, Address: address, Labels: lbls, GPUs: src,
				StateDir: filepath.Join(dir, "state"), LogDir: filepath.Join(dir, "logs"), Link: link,
				Detach: true, ShipLogs: true, Server: link.Base(), Interval: interval, Logger: logger, RunAs: runAs,
				RunAsFallback: host.runAsFallback, MaxLogSize: int64(host.maxLogSize), MinFreeDisk: float64(host.minFreeDisk),
			}
			if err := host.applyJobEnv(&cfg); err != nil {
				return err
			}
			if err := contain.apply(&cfg); err != nil {
				return err
			}
			login.apply(&cfg, dir) // agentlogin.go
			a, err := agent.New(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Corral agent %s for %s\n%s", version, server, banner(nodeName, devs, why, simulate != "", cmdkit.SelfName()))
			return a.Run(ctx)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&server, "server", "", "the corral server's URL (default $CORRAL_SERVER)")
	fl.StringVar(&nodeName, "node-name", "", "this node's id (default: the hostname)")
	fl.StringVar(&dataDir, "data-dir", ".corral-agent", "directory for task state and job logs")
	fl.StringVar(&simulate, "simulate-gpus", "", "offer simulated GPUs: N[:MODEL[:MEMGB[:TOPOLOGY]]][:mig=LAYOUT], e.g. 8:H100:80:mig=0-3:1g.10gb*7,4:3g.40gb+4g.40gb (docs/cluster.md#mig)")
	fl.StringVar(&simFaults, "simulate-faults", "", simFaultsHelp)
	fl.StringVar(&simForeign, "simulate-foreign", "", `with --simulate-gpus: a JSON file of made-up foreign processes, [{"gpu":0,"pid":123,"user":"bob"}], read at each report (for demos and tests of what NVML shows on real GPUs)`)
	fl.StringArrayVar(&labels, "label", nil, "a label of this node, K=V (repeatable); jobs can ask for it")
	fl.StringVar(&address, "address", "", "the address other nodes reach this one at (a gang's CORRAL_MASTER_ADDR); default: as the server sees it")
	fl.StringVar(&caFile, "ca-file", "", "PEM CAs to trust when the server uses HTTPS")
	fl.StringVar(&tokenFile, "join-token-file", "", "file holding the join token (default $CORRAL_JOIN_TOKEN)")
	cmdkit.DurationVar(fl, &interval, "interval", 5*time.Second, "how often to report telemetry and task states")
	fl.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	runAsFlag(fl, &runAs)
	host.registerLogSize(fl)
	host.registerNode(fl)
	contain.register(fl)
	login.register(fl)  // agentlogin.go
	withConfigFile(cmd) // configfile.go
	return cmd
}

// NewShimCmd is the hidden `corral shim`, the supervisor agents run jobs
// under.
func NewShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "shim",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			os.Exit(agent.RunShim(args))
			return nil
		},
	}
}
