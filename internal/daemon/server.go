package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/attach"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/agents"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/server"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/tunnel"
)

// controlFlags are the flags `corral server` and `corral up` share.
type controlFlags struct {
	dataDir     string
	listen      string
	nodeTTL     time.Duration
	backoff     time.Duration
	interval    time.Duration
	cancelGrace time.Duration
	tlsCert     string
	tlsKey      string
	logFormat   string
	logLevel    string
	access      accessFlags // auth.go
	runAs       string      // up only: whose account the local agent runs jobs under
	maxGPUs     int         // the most GPUs an agent may register for one node
	host        hostFlags   // hostflags.go: --max-log-size; up: --run-as-fallback, --min-free-disk
	// up only: the local agent's containment (containflags.go)
	contain containFlags

	// --dependency-timeout (up, server); 0: at once
	depTimeout time.Duration
	notify     notifyFlags // notifyflags.go

	executor executorFlags // mixed.go: --executor; rayflags.go: --ray-*
	booking  bookingFlags  // bookingflags.go: --booking-allowance, --purge-after
	cpuJobs  cpuJobFlags   // cpujobflags.go: --max-running-cpu-jobs-per-user
	gpuShare gpuShareFlags // gpushareflags.go: --notebook-mig
	// --budget-action (up, server): what an exhausted budget does unless
	// it says (budgetflags.go)
	budgetAction string
	keepHistory  keepHistoryFlag // --keep-history (history.go)
	storeURL     string          // --store: "" (the SQLite file in the data dir), sqlite://PATH or postgres://...
	advertise    string          // --advertise: the base URL others send clients to while this server leads (follower.go)
	login        loginFlags      // loginflags.go: --login-socket, --login-token-ttl, --login-group
	conns        connFlags       // --read-timeout, --write-timeout, --idle-timeout, --max-unauthenticated-conns (connflags.go)
}

func (f *controlFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir, "directory for the database and job logs")
	fl.StringVar(&f.listen, "listen", defaultListen, "HTTP address of the API")
	cmdkit.DurationVar(fl, &f.nodeTTL, "node-ttl", 30*time.Second, "how long a silent node stays up before its jobs are requeued")
	cmdkit.DurationVar(fl, &f.backoff, "retry-backoff", 10*time.Second, "how long a job whose node or attempt was lost waits before its retry (doubling per retry, up to 10m)")
	cmdkit.DurationVar(fl, &f.interval, "heartbeat", 5*time.Second, "how often agents report (telemetry, task states)")
	cmdkit.DurationVar(fl, &f.cancelGrace, "cancel-grace", 10*time.Second, "time a canceled job gets between SIGTERM and SIGKILL")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM); with --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the certificate's private key (PEM)")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.IntVar(&f.maxGPUs, "max-gpus-per-node", agents.DefaultMaxGPUs, fmt.Sprintf("the most GPUs an agent may register for one node (1 to %d); a registration with more is refused", agents.MaxGPUsLimit))
	cmdkit.DurationVar(fl, &f.depTimeout, "dependency-timeout", orchestrator.DefaultDependencyTimeout, "how long a queued job whose dependency can never be met (reason dependency_never_satisfied) waits before it is canceled; 0: at once")
	fl.StringVar(&f.advertise, "advertise", "", "with --store postgres://...: the base URL at which clients reach this server, given to them by the other servers while it leads (default: http(s)://, then the --listen address, with the host name for a wildcard address)")
	fl.StringVar(&f.storeURL, "store", "", "the database: sqlite://PATH or postgres://USER@HOST:PORT/DB (default: the SQLite file corral.db in --data-dir)")
	f.access.register(cmd)
	f.login.register(fl) // loginflags.go
	f.host.registerLogSize(fl)
	f.notify.register(fl)
	f.executor.register(fl)
	f.booking.register(fl)
	f.cpuJobs.register(fl)
	f.gpuShare.register(fl)
	f.conns.register(fl)
	registerBudgetAction(fl, &f.budgetAction) // budgetflags.go
	fl.Var(&f.keepHistory, "keep-history", "how long ended jobs (with their events and logs) are kept after they end, e.g. 365d or 720h; older ones are deleted in the background (0: kept for ever)")
}

// NewServerCmd is `corral server`: the control plane alone; nodes join with
// `corral agent --server URL`.
func NewServerCmd() *cobra.Command {
	var f controlFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane alone; GPU nodes join it with `corral agent`",
		Long: `corral server runs the scheduler, its HTTP API and the embedded store, without
running jobs itself: every GPU node runs "corral agent --server URL", which
registers the node's GPUs and runs the jobs placed there.

Agents present the join token: $CORRAL_JOIN_TOKEN when set, else one the server
makes on first start and keeps in <data-dir>/join.token (mode 0600).

The Go garbage collector runs at GOGC=400 (less CPU, more memory), with a soft
memory limit of 2.5 times the live heap (at least 400 MiB), unless $GOGC or
$GOMEMLIMIT is set.`,
		Example: `  corral server --listen 0.0.0.0:7450 --data-dir /var/lib/corral
  CORRAL_JOIN_TOKEN=$(cat /var/lib/corral/join.token) corral agent --server http://head:7450`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runControl(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr(), nil)
		},
	}
	f.register(cmd)
	withConfigFile(cmd) // configfile.go
	return cmd
}

// joinToken returns the token agents must present: $CORRAL_JOIN_TOKEN, else
// the one kept in the data dir, made on first start.
func joinToken(dataDir string) (token, source string, err error) {
	if t := strings.TrimSpace(os.Getenv("CORRAL_JOIN_TOKEN")); t != "" {
		return t, "$CORRAL_JOIN_TOKEN", nil
	}
	path := filepath.Join(dataDir, "join.token")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), path, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("join token: %w", err)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", fmt.Errorf("join token: %w", err)
	}
	t := hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("join token: %w", err)
	}
	return t, path, nil
}

// localNode is what `corral up` adds to the control plane: the in-process
// agent of node id, started once the pool exists, stopped when ctx ends.
// Its jobs outlive the server (shims in their own sessions); a restart
// adopts them as it does any agent's.
type localNode struct {
	id    string
	start func(ctx context.Context, pool *agents.Pool, logger *slog.Logger) (banner string, a *agent.Agent, err error)
}

// localRegisterWait bounds how long `corral up` waits for its own agent to
// register before it serves the API anyway.
const localRegisterWait = 30 * time.Second

// runControl runs the control plane: store, orchestrator, agent pool and
// HTTP API; with local != nil, the in-process agent of `corral up` too.
func runControl(ctx context.Context, f controlFlags, stdout, stderr io.Writer, local *localNode) error {
	logger, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	SetControlGC()
	go boundHeap(ctx, logger) // gc.go
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return cmdkit.Usagef("--tls-cert and --tls-key go together")
	}
	limits, err := f.access.limits()
	if err != nil {
		return err
	}
	connLimits, err := f.conns.limits()
	if err != nil {
		return err
	}
	if f.maxGPUs < 1 || f.maxGPUs > agents.MaxGPUsLimit {
		return cmdkit.Usagef("--max-gpus-per-node %d: want 1 to %d", f.maxGPUs, agents.MaxGPUsLimit)
	}
	if f.depTimeout < 0 {
		return cmdkit.Usagef("--dependency-timeout %s: must not be negative (0 cancels at once)", f.depTimeout)
	}
	if err := checkBudgetAction(f.budgetAction); err != nil { // budgetflags.go
		return err
	}
	if err := f.login.check(); err != nil { // loginflags.go
		return err
	}
	if _, _, err := store.ParseURL(f.storeURL, ""); err != nil {
		return cmdkit.Usagef("--store: %v", err)
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
	if err := store.SecureDataDir(dataDir, "logs", "agent"); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dataDir, err)
	}
	token, tokenSource, err := joinToken(dataDir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	defer ln.Close()
	st, err := store.OpenURL(ctx, f.storeURL, filepath.Join(dataDir, "corral.db"))
	if err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	defer st.Close()
	self, err := f.advertiseURL(ln.Addr()) // follower.go
	if err != nil {
		return err
	}
	// One HTTP server for the process's life: on PostgreSQL it answers as
	// a follower while another server leads (follower.go), then as the
	// leader, under the same listener.
	sw := &handlerSwitch{}
	// Streaming handlers (logs -f, agents' long polls) end when baseCtx
	// does, so a shutdown does not wait for them.
	baseCtx, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	srv := &http.Server{Handler: sw, BaseContext: func(net.Listener) context.Context { return baseCtx }}
	// Read, write and idle timeouts, and a cap on connections without a
	// valid token (connflags.go).
	conns := server.NewConns(connLimits, logger)
	conns.Configure(srv)
	srv.RegisterOnShutdown(endStreams)
	defer srv.Close()
	srvDone := make(chan error, 1)
	serving := false
	serve := func() {
		if serving {
			return
		}
		serving = true
		go func() {
			if f.tlsCert != "" {
				srvDone <- srv.ServeTLS(ln, f.tlsCert, f.tlsKey)
				return
			}
			srvDone <- srv.Serve(ln)
		}()
	}
	if st.Postgres() {
		if err := follow(ctx, st, dataDir, self, sw, logger); err != nil {
			return err
		}
		serve()
	}
	ctx, stopLeading, err := leadOnPostgres(ctx, st, dataDir, logger) // leader.go
	if err != nil {
		return err
	}
	defer stopLeading()

	authSvc, admin, err := setUpAuth(ctx, st, dataDir, logger)
	if err != nil {
		return err
	}

	// The pool reports to the orchestrator, which is built after it.
	var o *orchestrator.Orchestrator
	notes, err := f.notify.setUp(ctx, st, dataDir, jobSource{&o}, logger)
	if err != nil {
		return err
	}
	eng, err := newEngines(&f.executor, local != nil) // mixed.go
	if err != nil {
		return err
	}
	pool := agents.New(agents.Config{
		Sink:     eng.sink(func(u exec.Update) { o.Sink(u) }),
		Book:     eng.agentBook(nodeBook{&o}),
		Interval: f.interval, NodeTTL: f.nodeTTL, Logger: logger, MaxGPUs: f.maxGPUs,
	})
	if err := eng.build(&f.executor, pool, &o, eng.sink(func(u exec.Update) { o.Sink(u) }), dataDir, f.cancelGrace, int64(f.host.maxLogSize), logger); err != nil {
		return err
	}
	attached := attach.New(nil) // shells and notebook proxy connections, by job
	ocfg := orchestrator.Config{
		Store: st, Executor: eng.executor(), Pools: eng.pools(), DataDir: dataDir, NodeTTL: f.nodeTTL, RetryBackoff: f.backoff,
		CancelGrace: f.cancelGrace, Logger: logger, Version: version, Limits: limits,
		MaxLogSize: int64(f.host.maxLogSize), DependencyTimeout: f.depTimeout,
		Attach: attached, BudgetAction: f.budgetAction,
		Notify: notes.planner, AlertGPUTemp: f.notify.alertGPUTemp, AlertQueueWait: f.notify.alertQueueP95,
	}
	if err := f.booking.apply(&ocfg); err != nil {
		return err
	}
	if err := f.cpuJobs.apply(&ocfg); err != nil {
		return err
	}
	if err := f.gpuShare.apply(&ocfg); err != nil {
		return err
	}
	if f.depTimeout == 0 {
		ocfg.DependencyTimeout = -1 // the orchestrator's 0 is its default; the flag's 0 is at once
	}
	if local != nil {
		ocfg.Reap = func(ids map[string]bool) (int, error) { return agent.KillStrays(logger, ids) }
	}
	o, err = orchestrator.New(ctx, ocfg)
	if err != nil {
		return err
	}
	pruneCtx, stopPruning := context.WithCancel(ctx)
	pruned := make(chan struct{})
	go func() { pruneAudit(pruneCtx, st, f.access.auditRetention, logger); close(pruned) }()
	prunedJobs := make(chan struct{})
	go func() { o.PruneHistory(pruneCtx, time.Duration(f.keepHistory)); close(prunedJobs) }()
	defer func() { stopPruning(); <-prunedJobs }()
	defer func() { stopPruning(); <-pruned }() // before the store closes
	sendCtx, stopSending := context.WithCancel(context.WithoutCancel(ctx))
	sent := make(chan struct{})
	go func() { notes.run(sendCtx); close(sent) }()
	defer func() { stopSending(); <-sent }() // before the store closes; undelivered rows stay pending
	loopCtx, stopLoop := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoop()
	loopDone := make(chan error, 1)
	go func() { loopDone <- o.Run(loopCtx) }()
	engDone := eng.start(loopCtx, 5*time.Second) // the engine's polling: Ray or Slurm (mixed.go)
	defer func() { stopLoop(); <-engDone }()

	// The local agent registers before the API answers, so that a submit
	// right after start-up sees this machine's GPUs.
	agentCtx, stopAgent := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAgent()
	banner := ""
	var localAgent *agent.Agent
	if local != nil {
		if banner, localAgent, err = local.start(agentCtx, pool, logger); err != nil {
			return err
		}
		select {
		case <-localAgent.Registered():
		case <-ctx.Done():
			return nil
		case <-time.After(localRegisterWait):
			logger.Warn("the local agent has not registered yet; serving the API anyway", "waited", localRegisterWait)
		}
	}

	tunnels := tunnel.NewHub() // shells and port streams into jobs (corral shell)
	if localAgent != nil {
		tunnels.SetLocal(local.id, localAgent)
	}

	opts := f.access.serverOptions(server.WithAgents(pool, token), server.WithAuth(authSvc), server.WithNotify(notes.routes), server.WithAttach(attached), server.WithAdvise(st), server.WithTunnel(tunnels), localNodeOption(local), server.WithProxyPublicURL(f.notify.publicURL), f.login.option(), server.WithConns(conns))
	if st.Postgres() {
		opts = append(opts, server.WithLeaderAddress(self)) // /healthz says it leads, and where
	}
	apiServer := server.New(o, logger, opts...)
	sw.set(apiServer)
	serve()
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	url := scheme + "://" + ln.Addr().String()
	// The login socket is served before the banner is printed, and the
	// banner says so: whoever waits for the banner may use it.
	var login strings.Builder
	if err := f.login.serve(ctx, apiServer, dataDir, self, &login, logger); err != nil { // loginflags.go
		return err
	}
	fmt.Fprintf(stdout, "Corral %s is up at %s\n%s", version, url, banner)
	fmt.Fprintf(stdout, "  data: %s\n  agents join with: CORRAL_JOIN_TOKEN=<the token in %s> %s agent --server %s\n", dataDir, tokenSource, cmdkit.SelfName(), url)
	io.WriteString(stdout, login.String())
	admin.announce(stdout, scheme, ln.Addr().String(), dataDir, local != nil, logger)

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case runErr = <-loopDone:
		logger.Error("orchestrator stopped", "err", runErr)
		notes.loopDied(runErr) // notifyflags.go: an admin alert, sent after the next start if not before
	case runErr = <-srvDone:
		logger.Error("HTTP server stopped", "err", runErr)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutCtx)
	// This machine's jobs run on under their shims: the next start on
	// this data directory adopts them (docs/operations.md).
	stopAgent()
	stopLoop()
	if errors.Is(runErr, http.ErrServerClosed) || errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	return runErr
}

// nodeBook hands the pool's node news to the orchestrator once it exists.
type nodeBook struct{ o **orchestrator.Orchestrator }

func (b nodeBook) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	return (*b.o).RegisterNode(ctx, reg, addr)
}

func (b nodeBook) NodeSeen(id string, r []api.GPUReading, f []api.ForeignProcess, at time.Time) {
	(*b.o).NodeSeen(id, r, f, at)
}

func (b nodeBook) NodeDisk(id, full string) { (*b.o).NodeDisk(id, full) }

// localNodeOption tells the API server which node runs on its own
// machine (corral up), so the notebook proxy dials its jobs directly.
func localNodeOption(local *localNode) server.Option {
	if local == nil {
		return func(*server.Server) {}
	}
	return server.WithLocalNode(local.id)
}
