package k8stest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Node is a node Kubelet registers.
type Node struct {
	Name      string
	GPUs      int
	Product   string // nvidia.com/gpu.product
	MemoryMiB int    // nvidia.com/gpu.memory
	Labels    map[string]string
}

// Kubelet plays the kubelet of its nodes: a pod bound to one of them runs
// as a local process (its container's command, with the pod's env, HOME
// and PATH only), its status is written through the API (Running, then
// Terminated with the exit code, 128+N for signal N), a deleted pod gets
// SIGTERM then SIGKILL after its grace before its object is removed, and
// its log is served to the API server's pod log API (HTTPS, the node's
// daemonEndpoints).
type Kubelet struct {
	c     kubernetes.Interface
	dir   string
	srv   *httptest.Server
	nodes map[string]bool

	mu    sync.Mutex
	procs map[types.UID]*proc
}

type proc struct {
	cmd     *exec.Cmd
	log     string
	done    chan struct{} // closed when the process ended and its status was written
	killing bool
}

// StartKubelet registers nodes and plays their kubelet until the test ends.
func StartKubelet(t testing.TB, c kubernetes.Interface, nodes ...Node) *Kubelet {
	t.Helper()
	k := &Kubelet{c: c, dir: t.TempDir(), nodes: map[string]bool{}, procs: map[types.UID]*proc{}}
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(k.serveLog))
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		k.mu.Lock()
		for _, p := range k.procs {
			if p.cmd.Process != nil {
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			}
		}
		k.mu.Unlock()
	})
	for _, n := range nodes {
		k.nodes[n.Name] = true
		if err := k.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	f := informers.NewSharedInformerFactory(c, 0)
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.podChanged(ctx, o) },
		UpdateFunc: func(_, o any) { k.podChanged(ctx, o) },
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() }) // runs before the cleanup above
	return k
}

// AddNode creates (or replaces) a Ready node with n's GPUs.
func (k *Kubelet) AddNode(ctx context.Context, n Node) error {
	_, port, _ := net.SplitHostPort(k.srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	labels := map[string]string{"kubernetes.io/hostname": n.Name}
	for key, v := range n.Labels {
		labels[key] = v
	}
	if n.Product != "" {
		labels["nvidia.com/gpu.product"] = n.Product
	}
	if n.MemoryMiB > 0 {
		labels["nvidia.com/gpu.memory"] = strconv.Itoa(n.MemoryMiB)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels}}
	_ = k.c.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	created, err := k.c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI),
	}
	created.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res,
		Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.Name}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(p)}},
	}
	if _, err := k.c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", n.Name, err)
	}
	return nil
}

// SetReady writes node name's Ready condition.
func (k *Kubelet) SetReady(ctx context.Context, name string, ready bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := corev1.ConditionTrue
		if !ready {
			st = corev1.ConditionFalse
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = k.c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func (k *Kubelet) logPath(p *corev1.Pod) string {
	return filepath.Join(k.dir, "logs", p.Namespace+"_"+p.Name+"_"+string(p.UID)+".log")
}

// podChanged starts a new pod's process, or stops a deleted pod's.
func (k *Kubelet) podChanged(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok || !k.nodes[p.Spec.NodeName] {
		return
	}
	k.mu.Lock()
	pr, known := k.procs[p.UID]
	k.mu.Unlock()
	switch {
	case p.DeletionTimestamp != nil && known:
		k.kill(ctx, p, pr)
	case p.DeletionTimestamp != nil:
		k.remove(ctx, p)
	case !known && p.Status.Phase == corev1.PodPending || !known && p.Status.Phase == "":
		k.run(ctx, p)
	}
}

// run starts the pod's process and writes it Running.
func (k *Kubelet) run(ctx context.Context, p *corev1.Pod) {
	ct := p.Spec.Containers[0]
	home := filepath.Join(k.dir, "home")
	_ = os.MkdirAll(home, 0o755)
	_ = os.MkdirAll(filepath.Join(k.dir, "logs"), 0o755)
	cmd := exec.Command(ct.Command[0], append(ct.Command[1:], ct.Args...)...)
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin"}
	for _, e := range ct.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Dir = home
	if ct.WorkingDir != "" {
		cmd.Dir = ct.WorkingDir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr := &proc{cmd: cmd, log: k.logPath(p), done: make(chan struct{})}
	f, err := os.Create(pr.log)
	if err == nil {
		cmd.Stdout, cmd.Stderr = f, f
		err = cmd.Start()
	}
	k.mu.Lock()
	k.procs[p.UID] = pr
	k.mu.Unlock()
	if err != nil {
		k.status(ctx, p, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}}, corev1.PodPending)
		close(pr.done)
		return
	}
	started := metav1.Now()
	k.status(ctx, p, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, corev1.PodRunning)
	go func() {
		err := cmd.Wait()
		f.Close()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			ws := ee.Sys().(syscall.WaitStatus)
			code = ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		phase, reason := corev1.PodSucceeded, "Completed"
		if code != 0 {
			phase, reason = corev1.PodFailed, "Error"
		}
		k.status(ctx, p, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, StartedAt: started, FinishedAt: metav1.Now()}}, phase)
		close(pr.done)
		k.mu.Lock()
		killing := pr.killing
		k.mu.Unlock()
		if killing {
			k.remove(ctx, p)
		}
	}()
}

// kill stops a deleted pod's process: SIGTERM, SIGKILL after the grace.
func (k *Kubelet) kill(ctx context.Context, p *corev1.Pod, pr *proc) {
	k.mu.Lock()
	if pr.killing {
		k.mu.Unlock()
		return
	}
	pr.killing = true
	k.mu.Unlock()
	select {
	case <-pr.done: // already ended: only the object is left
		k.remove(ctx, p)
		return
	default:
	}
	grace := 30 * time.Second
	if p.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
	}
	pid := pr.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	go func() {
		select {
		case <-pr.done:
		case <-time.After(grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()
}

// remove deletes the pod's object at once, as the kubelet does once its
// containers are gone.
func (k *Kubelet) remove(ctx context.Context, p *corev1.Pod) {
	zero := int64(0)
	for {
		err := k.c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond): // the API server is away: retried
		}
	}
}

// status writes the pod's container state and phase, retrying (as the
// kubelet's status manager does) while the API server cannot be reached.
func (k *Kubelet) status(ctx context.Context, p *corev1.Pod, st corev1.ContainerState, phase corev1.PodPhase) {
	for {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := k.c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.UID != p.UID {
				return nil
			}
			cur.Status.Phase = phase
			cur.Status.HostIP, cur.Status.PodIP = "127.0.0.1", "127.0.0.1"
			cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
				ImageID: "sha256:0000", State: st, Ready: st.Running != nil, Started: ptr(st.Running != nil)}}
			_, err = k.c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond): // the API server is away: retried
		}
	}
}

func ptr[T any](v T) *T { return &v }

// serveLog answers the API server's /containerLogs/NS/POD/CONTAINER: the
// process's output, followed until it ends with ?follow=true.
func (k *Kubelet) serveLog(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 {
		http.NotFound(w, r)
		return
	}
	p, err := k.c.CoreV1().Pods(parts[0]).Get(r.Context(), parts[1], metav1.GetOptions{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	k.mu.Lock()
	pr, ok := k.procs[p.UID]
	k.mu.Unlock()
	if !ok {
		http.Error(w, "container not started", http.StatusBadRequest)
		return
	}
	f, err := os.Open(pr.log)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	follow := r.URL.Query().Get("follow") == "true"
	fl, _ := w.(http.Flusher)
	for {
		if _, err := io.Copy(w, f); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		if !follow {
			return
		}
		select {
		case <-pr.done:
			_, _ = io.Copy(w, f)
			return
		case <-r.Context().Done():
			return
		case <-time.After(50 * time.Millisecond): // a file being written: tailed
		}
	}
}
