// Package ray runs Corral's jobs on a Ray cluster through the Ray Jobs API
// of its head (the dashboard's HTTP server, port 8265): each attempt is one
// Ray job whose submission_id is the attempt's id, pinned to the node
// Corral's core chose with entrypoint_resources {"node:IP": 0.001}. The
// cluster's alive nodes and their GPUs are registered with the
// orchestrator as pool "ray" (nodes.go); state and logs are polled.
//
// Corral's record is the truth: a job the head no longer knows (a head
// restart) is reported lost; a head that cannot be reached opens a circuit
// breaker, its nodes are marked down (nothing new is placed there; what
// runs keeps its state), and the executor probes with backoff until the
// head answers again.
package ray

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/exec"
)

// PoolName is the pool label the executor gives its nodes by default.
const PoolName = "ray"

// NodeBook is the part of the orchestrator that keeps the node registry.
type NodeBook = exec.NodeBook

// Config is what an Executor needs. Address and Sink are required.
type Config struct {
	// Address is the Ray dashboard's URL, e.g. http://head:8265.
	Address string
	// Token is Ray's auth token (RAY_AUTH_TOKEN), sent as
	// "Authorization: Bearer"; empty: none.
	Token string
	Sink  exec.Sink
	// Book learns the cluster's nodes; nil: nobody (tests that drive the
	// executor alone).
	Book NodeBook
	// Pool is the value of the "pool" label of the cluster's nodes;
	// default "ray".
	Pool string
	// Poll is how often nodes and jobs are polled; default 1s.
	Poll time.Duration
	// StopWait is RAY_JOB_STOP_WAIT_TIME_S of every job: how long Ray
	// waits between SIGTERM and SIGKILL when a job is stopped. Default 10s.
	StopWait time.Duration
	// Breaker sets the circuit breaker (failures in a row before it opens,
	// first reset timeout, cap of its backoff).
	Breaker breaker.Config
	// MaxLogSize caps each rank's stored log, as the server's
	// --max-log-size caps agents' (a marker line, then nothing); 0: none.
	MaxLogSize int64
	// HTTP is the client; default one with a 10s timeout.
	HTTP   *http.Client
	Logger *slog.Logger
	Now    func() time.Time // default time.Now
}

// Health is what GET /orchestrator/status shows of an executor.
type Health = exec.Health

// Executor runs tasks as Ray jobs. It is safe for concurrent use; Run
// must be running for nodes and job states to be followed.
type Executor struct {
	cfg Config
	c   client
	br  *breaker.Breaker
	log *slog.Logger

	mu       sync.Mutex
	tasks    map[key]*attempt
	nodes    map[string]NodeState // Corral node id -> Ray node, alive at the last poll
	known    map[string]string    // Corral node id -> what was registered (to register again on change)
	downSent bool                 // the nodes were marked down since the breaker opened
	polled   bool                 // the node list was read at least once
}

// New returns an executor for the Ray head at cfg.Address.
func New(cfg Config) (*Executor, error) {
	if cfg.Address == "" || cfg.Sink == nil {
		return nil, errors.New("ray: Address and Sink are required")
	}
	if cfg.Book == nil {
		cfg.Book = noBook{}
	}
	if !strings.HasPrefix(cfg.Address, "http://") && !strings.HasPrefix(cfg.Address, "https://") {
		return nil, fmt.Errorf("ray: address %q: want http://host:port or https://host:port (the dashboard, port 8265 by default)", cfg.Address)
	}
	if cfg.Pool == "" {
		cfg.Pool = PoolName
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.StopWait <= 0 {
		cfg.StopWait = 10 * time.Second
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Executor{cfg: cfg, c: client{base: strings.TrimRight(cfg.Address, "/"), token: cfg.Token, http: cfg.HTTP},
		br: breaker.New(cfg.Breaker), log: cfg.Logger.With("executor", "ray"),
		tasks: map[key]*attempt{}, nodes: map[string]NodeState{}, known: map[string]string{}}, nil
}

// noBook is the NodeBook of an executor nobody follows the nodes of.
type noBook struct{}

func (noBook) RegisterNode(context.Context, api.AgentRegistration, string) error  { return nil }
func (noBook) NodeSeen(string, []api.GPUReading, []api.ForeignProcess, time.Time) {}
func (noBook) NodeDown(string, time.Time)                                         {}

// SubmissionID is the Ray submission_id of a job's attempt.
func SubmissionID(jobID string, attempt int) string {
	return fmt.Sprintf("corral-%s-%d", jobID, attempt)
}

// call runs f through the breaker: refused at once while it is open;
// an unreachable cluster counts as a failure, any answer as a success.
func (e *Executor) call(f func() error) error {
	return e.br.Do(e.cfg.Now, Unreachable, f)
}
