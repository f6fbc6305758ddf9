package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec/k8s/k8stest"
	"github.com/corral-sched/corral/internal/exec/k8s/pod"
)

// podSays returns the exit code Kubernetes holds for rank r of a Corral
// attempt (its container's terminated state), or -1 while there is none.
func podSays(t *testing.T, c *k8stest.Cluster, jobID string, attempt, r int) int {
	t.Helper()
	p, err := c.Client.CoreV1().Pods("default").Get(context.Background(), pod.PodName(jobID, attempt, r), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod of %s attempt %d rank %d: %v", jobID, attempt, r, err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return int(cs.State.Terminated.ExitCode)
		}
	}
	return -1
}

// TestKubernetes points `corral server --executor k8s` at a real
// kube-apiserver (k8stest: etcd and kube-apiserver from $CORRAL_K8S_BIN,
// pods run by its emulated kubelet) and runs a one-node job, a two-node
// gang, a failing job, a canceled one and a preempted one, comparing
// Corral's states, exit codes and logs with the pods' own status; then
// it restarts the API server and the Corral server while a job runs.
func TestKubernetes(t *testing.T) {
	c := k8stest.Start(t)
	k8stest.StartKubelet(t, c.Client,
		k8stest.Node{Name: "gpu-a", GPUs: 2, Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559},
		k8stest.Node{Name: "gpu-b", GPUs: 2, Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559})
	dataDir, port := t.TempDir(), freePort(t)
	args := []string{"server", "--executor", "k8s", "--k8s-kubeconfig", c.Kubeconfig(t), "--k8s-image", "busybox:1.36",
		"--k8s-keep-ended", "1h", "--k8s-breaker-failures", "1", "--k8s-breaker-reset", "200ms", "--k8s-breaker-max-reset", "1s"}
	s := startControl(t, dataDir, port, nil, args...)
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("cluster %+v", s.cluster()) }, func() bool {
		return len(s.cluster().Nodes) == 2
	})
	for _, n := range s.cluster().Nodes {
		if n.GPUCount != 2 || n.Labels["pool"] != "k8s" || !strings.HasPrefix(n.NodeID, "k8s-gpu-") {
			t.Fatalf("node %s: %d GPUs, labels %v; want 2 and pool=k8s", n.NodeID, n.GPUCount, n.Labels)
		}
	}

	t.Run("one node", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": `echo "rank=$CORRAL_NODE_RANK of $CORRAL_NUM_NODES node=$CORRAL_NODE_ID"`, "gpu_count": 2})
		j = s.waitState(j.ID, api.StateCompleted, 60*time.Second)
		if logs := s.logs(j.ID); !strings.Contains(logs, "rank=0 of 1 node="+j.Allocation[0].NodeID) {
			t.Errorf("logs %q", logs)
		}
		if code := podSays(t, c, j.ID, 0, 0); code != 0 || *j.ExitCode != 0 {
			t.Errorf("the pod says exit %d; Corral %s exit %d", code, j.State, *j.ExitCode)
		}
	})

	t.Run("two nodes", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": `echo "rank=$CORRAL_NODE_RANK of=$CORRAL_NUM_NODES master=$CORRAL_MASTER_ADDR"`, "gpu_count": 1, "nodes": 2})
		j = s.waitState(j.ID, api.StateCompleted, 60*time.Second)
		if logs := s.logs(j.ID); !strings.Contains(logs, "rank=0 of=2 master="+pod.AttemptName(j.ID, 0)) {
			t.Errorf("rank 0's log %q: want the gang's Service as master", logs)
		}
		for r := range 2 {
			if code := podSays(t, c, j.ID, 0, r); code != 0 {
				t.Errorf("rank %d's pod says exit %d", r, code)
			}
		}
	})

	t.Run("failing", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": "echo failing; exit 3", "gpu_count": 1})
		j = s.waitState(j.ID, api.StateFailed, 60*time.Second)
		if j.ExitCode == nil || *j.ExitCode != 3 || j.Reason != api.ReasonExitCode {
			t.Errorf("job %s %s exit %v; want failed, exit_code, 3", j.State, j.Reason, j.ExitCode)
		}
		if code := podSays(t, c, j.ID, 0, 0); code != 3 {
			t.Errorf("the pod says exit %d; want 3", code)
		}
		if logs := s.logs(j.ID); !strings.Contains(logs, "failing") {
			t.Errorf("logs %q", logs)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		s := s.on(t)
		j := cancelRunning(t, s)
		_, err := c.Client.CoreV1().Pods("default").Get(context.Background(), pod.PodName(j.ID, 0, 0), metav1.GetOptions{})
		if err == nil {
			t.Errorf("the canceled attempt's pod is still there: a stop is a delete")
		}
	})

	t.Run("preempted", func(t *testing.T) {
		s := s.on(t)
		s.setPolicies(map[string]any{"policy": "priority", "preemption": true, "min_run_time": 0, "preempt_grace": "5s"})
		defer s.setPolicies(map[string]any{"preemption": false})
		low := s.submit(map[string]any{"command": `trap 'echo "TERM in attempt $CORRAL_ATTEMPT"; exit 0' TERM; echo "attempt $CORRAL_ATTEMPT"; sleep 300 & wait`,
			"gpu_count": 2, "nodes": 2, "priority": "low"})
		s.waitState(low.ID, api.StateRunning, 60*time.Second)
		waitFor(t, 30*time.Second, func() string { return "rank 0's first line" }, func() bool { return strings.Contains(s.logs(low.ID), "attempt 0") })
		high := s.submit(map[string]any{"command": "echo high", "gpu_count": 2, "nodes": 2, "priority": "critical"})
		s.waitJob(low.ID, 60*time.Second, "to be preempted", func(j api.Job) bool { return j.Preemptions > 0 })
		s.waitState(high.ID, api.StateCompleted, 60*time.Second)
		j := s.waitJob(low.ID, 60*time.Second, "to run again", func(j api.Job) bool { return j.State == api.StateRunning && j.RetryCount == 1 })
		first := s.do("GET", "/jobs/"+j.ID+"/logs?attempt=0", nil, nil)
		if !strings.Contains(string(first.Body), "TERM in attempt 0") {
			t.Errorf("attempt 0's logs %q: want the SIGTERM of the preemption", first.Body)
		}
		s.do("DELETE", "/queue/"+low.ID, nil, nil)
		s.waitTerminal(low.ID, 60*time.Second)
	})

	t.Run("restarts", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": `echo "run $CORRAL_ATTEMPT"; sleep 8; echo done; exit 4`, "gpu_count": 1})
		s.waitState(j.ID, api.StateRunning, 60*time.Second)
		c.StopAPIServer(t)
		s.waitJob(j.ID, 30*time.Second, "to keep running while the API server is away", func(j api.Job) bool { return j.State == api.StateRunning })
		queued := s.submit(map[string]any{"command": "echo later", "gpu_count": 1})
		s.stop()
		c.StartAPIServer(t)
		s2 := startControl(t, dataDir, port, nil, args...).on(t)
		j = s2.waitTerminal(j.ID, 90*time.Second)
		if j.State != api.StateFailed || j.ExitCode == nil || *j.ExitCode != 4 || j.RetryCount != 0 {
			t.Errorf("job %s exit %v retries %d; want failed with exit 4, run once", j.State, j.ExitCode, j.RetryCount)
		}
		if code := podSays(t, c, j.ID, 0, 0); code != 4 {
			t.Errorf("the pod says exit %d; want 4", code)
		}
		if logs := s2.logs(j.ID); strings.Count(logs, "run 0") != 1 || !strings.Contains(logs, "done") {
			t.Errorf("logs %q: want one run, to its end", logs)
		}
		if q := s2.waitState(queued.ID, api.StateCompleted, 60*time.Second); q.RetryCount != 0 {
			t.Errorf("the job submitted meanwhile ran %d times", q.RetryCount+1)
		}
		pods, err := c.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: pod.LabelJob + "=" + j.ID})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodFailed {
			t.Errorf("pods of %s: %v %+v; want one, failed", j.ID, err, pods)
		}
	})
}
