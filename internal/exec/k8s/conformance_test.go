package k8s_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/exectest"
	"github.com/corral-sched/corral/internal/exec/k8s"
	"github.com/corral-sched/corral/internal/exec/k8s/k8stest"
)

// env is one control plane and one emulated kubelet for a test function.
type env struct {
	c  *k8stest.Cluster
	kl *k8stest.Kubelet
	ns atomic.Int32
}

func newEnv(t *testing.T) *env {
	c := k8stest.Start(t)
	kl := k8stest.StartKubelet(t, c.Client,
		k8stest.Node{Name: "gpu-a", GPUs: 2, Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559},
		k8stest.Node{Name: "gpu-b", GPUs: 2, Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559})
	return &env{c: c, kl: kl}
}

// namespace creates a fresh namespace, so that cases do not meet.
func (v *env) namespace(t *testing.T) string {
	name := fmt.Sprintf("case-%d", v.ns.Add(1))
	if _, err := v.c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// executor starts an executor on ns until the test ends.
func (v *env) executor(t *testing.T, ns string, sink exec.Sink, book k8s.NodeBook) *k8s.Executor {
	ex, err := k8s.New(k8s.Config{Client: v.c.Client, Address: v.c.URL, Sink: sink, Book: book, Namespace: ns, Image: "busybox:1.36",
		Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ex.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if !ex.WaitSynced(wctx) {
		t.Fatal("the executor's informers did not sync within 30s")
	}
	return ex
}

func place(nodes, gpus int) ([]exec.Rank, bool) {
	if nodes > 2 || gpus > 2 {
		return nil, false
	}
	var rs []exec.Rank
	for i := range nodes {
		r := exec.Rank{NodeID: k8s.NodeID([]string{"gpu-a", "gpu-b"}[i])}
		for g := range gpus {
			r.GPUs = append(r.GPUs, g)
		}
		rs = append(rs, r)
	}
	return rs, true
}

// TestConformance runs the executors' conformance suite against the
// Kubernetes executor and a real kube-apiserver; pods run as local
// processes of k8stest's kubelet. A restart is a second executor on the
// same cluster and namespace. The preemption notice is skipped: the
// notice file is on the Corral server, not in the pod.
func TestConformance(t *testing.T) {
	v := newEnv(t)
	exectest.Run(t, func(t *testing.T) *exectest.Harness {
		ns := v.namespace(t)
		u := exectest.NewUpdates()
		start := func(t *testing.T) exec.Executor { return v.executor(t, ns, u.Sink, nil) }
		return &exectest.Harness{Exec: start(t), Updates: u, Dir: t.TempDir(), Place: place, Restart: start, Timeout: 60 * time.Second}
	})
}

// TestPodsOfAnAttempt checks what the executor submits: pods bound to
// their nodes with GPU limits, labels and rank variables, and a gang's
// headless Service, as the API server stores them.
func TestPodsOfAnAttempt(t *testing.T) {
	v := newEnv(t)
	ns := v.namespace(t)
	u := exectest.NewUpdates()
	ex := v.executor(t, ns, u.Sink, nil)
	ranks, _ := place(2, 2)
	tk := exec.Task{JobID: "j1", Attempt: 2, User: "ada", Command: "true", Ranks: ranks, CPUs: 1.5, MemMiB: 1024, LogPath: t.TempDir() + "/2.log"}
	if err := ex.Start(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var pods *corev1.PodList
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		pods, err = v.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "corral.dev/job-id=j1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // objects created in the background: polled through the API
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		r := p.Labels["corral.dev/rank"]
		want := map[string]string{"0": "gpu-a", "1": "gpu-b"}[r]
		if p.Spec.NodeName != want || p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Labels["corral.dev/user"] != "ada" || p.Labels["corral.dev/attempt"] != "2" {
			t.Errorf("pod %s: node %q restart %q labels %v", p.Name, p.Spec.NodeName, p.Spec.RestartPolicy, p.Labels)
		}
		lim := p.Spec.Containers[0].Resources.Limits
		if g := lim["nvidia.com/gpu"]; g.Value() != 2 || lim.Cpu().MilliValue() != 1500 || lim.Memory().Value() != 1<<30 {
			t.Errorf("pod %s limits %v", p.Name, lim)
		}
		envs := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			envs[e.Name] = e.Value
		}
		if envs["CORRAL_NODE_RANK"] != r || envs["CORRAL_NUM_NODES"] != "2" || envs["CORRAL_MASTER_ADDR"] != "corral-j1-2" || p.Spec.Containers[0].Image != "busybox:1.36" {
			t.Errorf("pod %s env %v image %s", p.Name, envs, p.Spec.Containers[0].Image)
		}
	}
	svc, err := v.c.Client.CoreV1().Services(ns).Get(ctx, "corral-j1-2", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gang's Service: %v", err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector["corral.dev/rank"] != "0" {
		t.Errorf("Service %+v: want headless, selecting rank 0", svc.Spec)
	}
	if !strings.HasPrefix(ex.Health()[0].Breaker, "closed") || ex.Health()[0].Nodes != 2 {
		t.Errorf("health %+v", ex.Health())
	}
}
