package daemon

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/k8s"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// k8sFlags are the Kubernetes executor's flags (--executor k8s;
// docs/executors.md).
type k8sFlags struct {
	kubeconfig   string
	context      string
	inCluster    bool
	namespace    string
	image        string
	nodeSelector []string
	keepEnded    time.Duration
	failures     int
	reset        time.Duration
	maxReset     time.Duration
}

func (f *k8sFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.kubeconfig, "k8s-kubeconfig", "", "with --executor k8s: the kubeconfig file of the cluster (default: $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&f.context, "k8s-context", "", "with --executor k8s: the kubeconfig context (default: its current context)")
	fl.BoolVar(&f.inCluster, "k8s-in-cluster", false, "with --executor k8s: use the pod's service account (Corral's server running in the cluster) instead of a kubeconfig")
	fl.StringVar(&f.namespace, "k8s-namespace", "default", "with --executor k8s: the namespace of the jobs' pods")
	fl.StringVar(&f.image, "k8s-image", "", "with --executor k8s: the image of jobs that name none (--image); required")
	fl.StringArrayVar(&f.nodeSelector, "k8s-node-selector", nil, "with --executor k8s: KEY=VALUE a node must have for Corral to use it, set on every pod too (repeatable)")
	cmdkit.DurationVar(fl, &f.keepEnded, "k8s-keep-ended", 10*time.Minute, "with --executor k8s: how long an ended attempt's pods stay in the cluster (their status and logs, for kubectl) before Corral deletes them")
	fl.IntVar(&f.failures, "k8s-breaker-failures", 3, "with --executor k8s: failed calls to the API server in a row that open the circuit breaker (the cluster's nodes go down; jobs stay queued)")
	cmdkit.DurationVar(fl, &f.reset, "k8s-breaker-reset", 2*time.Second, "with --executor k8s: how long the open breaker waits before probing the API server again (doubling after each failed probe)")
	cmdkit.DurationVar(fl, &f.maxReset, "k8s-breaker-max-reset", 30*time.Second, "with --executor k8s: the longest wait between probes")
}

// restConfig is the client configuration the flags name.
func (f *k8sFlags) restConfig() (*rest.Config, string, error) {
	if f.inCluster {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", cmdkit.Usagef("--k8s-in-cluster: %v", err)
		}
		return c, c.Host, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, "", cmdkit.Usagef("--executor k8s: no cluster to talk to (--k8s-kubeconfig, $KUBECONFIG or --k8s-in-cluster): %v", err)
	}
	return c, c.Host, nil
}

// executor builds the Kubernetes executor from the flags.
func (f *k8sFlags) executor(book k8s.NodeBook, sink exec.Sink, cancelGrace time.Duration, maxLog int64, logger *slog.Logger) (*k8s.Executor, error) {
	if f.image == "" {
		return nil, cmdkit.Usagef("--executor k8s needs --k8s-image: the image of jobs that name none (e.g. nvcr.io/nvidia/pytorch:25.01-py3)")
	}
	if f.failures < 1 || f.reset <= 0 || f.maxReset < f.reset || f.keepEnded < 0 {
		return nil, cmdkit.Usagef("--k8s-breaker-failures and --k8s-breaker-reset must be positive, --k8s-breaker-max-reset at least the reset, --k8s-keep-ended not negative")
	}
	sel := map[string]string{}
	for _, kv := range f.nodeSelector {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, cmdkit.Usagef("--k8s-node-selector %q: want KEY=VALUE", kv)
		}
		sel[k] = v
	}
	rc, host, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "corral/" + version
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, cmdkit.Usagef("--executor k8s: %v", err)
	}
	return k8s.New(k8s.Config{Client: cs, Address: host, Sink: sink, Book: book, Pool: api.PoolK8s, Namespace: f.namespace,
		Image: f.image, NodeSelector: sel, Grace: cancelGrace, KeepEnded: f.keepEnded, MaxLogSize: maxLog, Logger: logger,
		Breaker: breaker.Config{Threshold: f.failures, Reset: f.reset, MaxReset: f.maxReset}})
}

// k8sBook hands the Kubernetes executor's node news to the orchestrator
// once it exists.
type k8sBook struct{ o **orchestrator.Orchestrator }

func (b k8sBook) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	return (*b.o).RegisterNode(ctx, reg, addr)
}

func (b k8sBook) NodeSeen(id string, r []api.GPUReading, f []api.ForeignProcess, at time.Time) {
	(*b.o).NodeSeen(id, r, f, at)
}

func (b k8sBook) NodeDown(id string, at time.Time) { (*b.o).NodeDown(id, at) }
