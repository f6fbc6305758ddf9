// Package k8s runs Corral's jobs on a Kubernetes cluster through its API
// server (client-go). Corral's core decides placement, as for Slurm and
// Ray: each attempt is one Pod per rank bound to the node the core chose
// (spec.nodeName, so the Kubernetes scheduler is not involved), with
// nvidia.com/gpu limits, restartPolicy Never and Corral's variables; a
// gang also gets a headless Service named CORRAL_MASTER_ADDR (package pod
// builds them, and `corral export k8s` prints the same objects).
//
//	orchestrator ──Start/Stop/Adopt──▶ Executor ──create/delete──▶ API server
//	      ▲                              │  ▲                          │
//	      └────────── Sink ◀─────────────┘  └── shared informers ◀─────┘
//	                                            (pods, nodes: watch)
//
// Nodes and pods are followed with shared informers (a list, then a
// watch): nodes that are Ready, schedulable and have allocatable
// nvidia.com/gpu are registered as pool "k8s" (nodes.go); a pod's
// container status gives the attempt's start and exit code (attempts.go);
// its output comes from the pod log API (logs.go). A periodic probe of the
// API server drives a circuit breaker: while it is open the cluster's
// nodes are down to the orchestrator, so jobs stay queued, and client-go's
// informers reconnect on their own.
package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/k8s/pod"
)

// PoolName is the pool label the executor gives its nodes by default.
const PoolName = "k8s"

// callTimeout bounds one request to the API server (not a watch or a log
// stream).
const callTimeout = 15 * time.Second

// NodePrefix starts the Corral node id of every Kubernetes node.
const NodePrefix = "k8s-"

// NodeBook is the part of the orchestrator that keeps the node registry.
type NodeBook = exec.NodeBook

// Config is what an Executor needs. Client and Sink are required.
type Config struct {
	Client kubernetes.Interface
	// Address names the API server in GET /orchestrator/status.
	Address string
	Sink    exec.Sink
	// Book learns the cluster's nodes; nil: nobody.
	Book NodeBook
	// Pool is the value of the nodes' "pool" label; default "k8s".
	Pool string
	// Namespace of the attempts' pods; default "default".
	Namespace string
	// Image runs jobs that name none.
	Image string
	// NodeSelector restricts the nodes Corral uses (and is set on every
	// pod); empty: every node with GPUs.
	NodeSelector map[string]string
	// Grace is the pods' terminationGracePeriodSeconds (a stop sets its
	// own); default 30s.
	Grace time.Duration
	// Heartbeat is how often the API server is probed and the nodes are
	// reported seen; default 1s.
	Heartbeat time.Duration
	Breaker   breaker.Config
	// KeepEnded is how long an ended attempt's pods (their status, exit
	// codes, logs) stay in the cluster once the orchestrator recorded the
	// end; 0: deleted at once.
	KeepEnded time.Duration
	// MaxLogSize caps each rank's stored log; 0: none.
	MaxLogSize int64
	Logger     *slog.Logger
	Now        func() time.Time // default time.Now
}

// Executor runs tasks as pods. It is safe for concurrent use; Run must be
// running for nodes and pods to be followed.
type Executor struct {
	cfg  Config
	br   *breaker.Breaker
	log  *slog.Logger
	opts pod.Options

	pods    informers.SharedInformerFactory
	nodes   informers.SharedInformerFactory
	podInf  cache.SharedIndexInformer
	nodeInf cache.SharedIndexInformer
	synced  chan struct{} // closed once both informers have listed once

	mu       sync.Mutex
	tasks    map[key]*attempt
	known    map[string]string // Corral node id -> fingerprint of what was registered
	ready    map[string]bool   // Corral node id -> usable at the last look
	downSent bool              // the nodes were marked down since the breaker opened
}

// New returns an executor for the cluster cfg.Client talks to.
func New(cfg Config) (*Executor, error) {
	if cfg.Client == nil || cfg.Sink == nil {
		return nil, errors.New("k8s: Client and Sink are required")
	}
	if cfg.Book == nil {
		cfg.Book = noBook{}
	}
	if cfg.Pool == "" {
		cfg.Pool = PoolName
	}
	if cfg.Namespace == "" {
		cfg.Namespace = corev1.NamespaceDefault
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Executor{cfg: cfg, br: breaker.New(cfg.Breaker), log: cfg.Logger.With("executor", "k8s"),
		synced: make(chan struct{}),
		tasks:  map[key]*attempt{}, known: map[string]string{}, ready: map[string]bool{}}
	e.opts = pod.Options{Namespace: cfg.Namespace, Image: cfg.Image, NodeSelector: cfg.NodeSelector, Grace: cfg.Grace, NodeName: NodeName}
	sel := labels.SelectorFromSet(labels.Set{pod.LabelManagedBy: pod.ManagedBy}).String()
	e.pods = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	e.nodes = informers.NewSharedInformerFactory(cfg.Client, 0)
	e.podInf = e.pods.Core().V1().Pods().Informer()
	e.nodeInf = e.nodes.Core().V1().Nodes().Informer()
	watchErr := func(_ *cache.Reflector, err error) {
		if !errors.Is(err, context.Canceled) {
			e.log.Debug("watch interrupted; client-go lists and watches again", "err", err)
		}
	}
	if err := e.podInf.SetWatchErrorHandler(watchErr); err != nil {
		return nil, fmt.Errorf("k8s: %w", err)
	}
	if err := e.nodeInf.SetWatchErrorHandler(watchErr); err != nil {
		return nil, fmt.Errorf("k8s: %w", err)
	}
	if _, err := e.podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.podChanged(o) },
		UpdateFunc: func(_, o any) { e.podChanged(o) },
		DeleteFunc: func(o any) { e.podDeleted(o) },
	}); err != nil {
		return nil, fmt.Errorf("k8s: %w", err)
	}
	if _, err := e.nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { e.nodesChanged() },
		UpdateFunc: func(_, _ any) { e.nodesChanged() },
		DeleteFunc: func(o any) { e.nodeDeleted(o) },
	}); err != nil {
		return nil, fmt.Errorf("k8s: %w", err)
	}
	return e, nil
}

// noBook is the NodeBook of an executor nobody follows the nodes of.
type noBook struct{}

func (noBook) RegisterNode(context.Context, api.AgentRegistration, string) error  { return nil }
func (noBook) NodeSeen(string, []api.GPUReading, []api.ForeignProcess, time.Time) {}
func (noBook) NodeDown(string, time.Time)                                         {}

// Options are the pod options the executor builds its pods with (what
// `corral export k8s` needs to print the same objects).
func (e *Executor) Options() pod.Options { return e.opts }

// Run starts the informers and the heartbeat and returns when ctx ends.
// Start's pods are created at once; their states are followed only while
// Run runs.
func (e *Executor) Run(ctx context.Context) {
	e.pods.Start(ctx.Done())
	e.nodes.Start(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), e.podInf.HasSynced, e.nodeInf.HasSynced) {
			e.nodesChanged()
			close(e.synced)
			e.adoptPending(ctx)
		}
	}()
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	for {
		e.heartbeat(ctx)
		select {
		case <-ctx.Done():
			e.pods.Shutdown()
			e.nodes.Shutdown()
			return
		case <-t.C:
		}
	}
}

// WaitSynced blocks until the informers have listed once and the nodes
// were registered, or ctx ends.
func (e *Executor) WaitSynced(ctx context.Context) bool {
	select {
	case <-e.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

// call runs f through the breaker: refused at once while it is open; an
// unreachable API server counts as a failure, any answer as a success.
func (e *Executor) call(f func() error) error {
	return e.br.Do(e.cfg.Now, Unreachable, f)
}

// heartbeat probes the API server (through the breaker) and tells the
// orchestrator which nodes are alive: every usable one is seen while the
// server answers; all go down at once when the breaker opens.
func (e *Executor) heartbeat(ctx context.Context) {
	err := e.call(func() error {
		pctx, cancel := context.WithTimeout(ctx, callTimeout) // a server that takes the connection and never answers is away too
		defer cancel()
		_, err := e.cfg.Client.Discovery().RESTClient().Get().AbsPath("/version").Do(pctx).Raw()
		return err
	})
	now := e.cfg.Now()
	if err != nil {
		if e.br.Snapshot().State == breaker.Closed {
			return // not yet: the breaker decides when the cluster is away
		}
		e.mu.Lock()
		down := !e.downSent
		e.downSent = true
		ids := make([]string, 0, len(e.known))
		for id := range e.known {
			ids = append(ids, id)
		}
		e.mu.Unlock()
		if down {
			e.log.Warn("Kubernetes API server unreachable; its nodes are down until it answers", "address", e.cfg.Address, "err", err)
			for _, id := range ids {
				e.cfg.Book.NodeDown(id, now)
			}
		}
		return
	}
	e.mu.Lock()
	back := e.downSent
	e.downSent = false
	var alive []string
	for id, ok := range e.ready {
		if ok {
			alive = append(alive, id)
		}
	}
	e.mu.Unlock()
	if back {
		e.log.Info("Kubernetes API server answers again", "address", e.cfg.Address)
	}
	for _, id := range alive {
		e.cfg.Book.NodeSeen(id, nil, nil, now)
	}
}

// Health reports the executor's breaker, for GET /orchestrator/status.
func (e *Executor) Health() []exec.Health {
	h := exec.BreakerHealth("k8s", e.cfg.Pool, e.cfg.Address, e.br.Snapshot())
	e.mu.Lock()
	for _, ok := range e.ready {
		if ok {
			h.Nodes++
		}
	}
	e.mu.Unlock()
	return []exec.Health{h}
}
