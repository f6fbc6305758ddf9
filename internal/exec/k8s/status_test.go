package k8s_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec/k8s"
)

func terminated(code int32, reason string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}}
}

func TestStatusOf(t *testing.T) {
	evicted := terminated(137, "Error")
	evicted.Reason = "Evicted"
	tainted := terminated(143, "Error")
	tainted.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager"}}
	for name, c := range map[string]struct {
		st       corev1.PodStatus
		stopping bool
		running  bool
		ended    bool
		code     int
		signal   string
		oom      bool
		lost     string
		err      bool
	}{
		"pending":       {st: corev1.PodStatus{Phase: corev1.PodPending}},
		"running":       {st: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}, running: true},
		"exit 0":        {st: terminated(0, "Completed"), running: true, ended: true},
		"exit 3":        {st: terminated(3, "Error"), running: true, ended: true, code: 3},
		"killed":        {st: terminated(137, "Error"), running: true, ended: true, code: 137, signal: "killed"},
		"oom":           {st: terminated(137, "OOMKilled"), running: true, ended: true, code: 137, signal: "killed", oom: true},
		"evicted":       {st: evicted, running: true, ended: true, code: 137, signal: "killed", lost: api.ReasonLost, err: true},
		"evicted, ours": {st: evicted, stopping: true, running: true, ended: true, code: 137, signal: "killed"},
		"taint":         {st: tainted, running: true, ended: true, code: 143, signal: "terminated", lost: api.ReasonNodeLost, err: true},
		"node lost":     {st: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "NodeLost"}, ended: true, code: -1, lost: api.ReasonNodeLost, err: true},
		"bad image": {st: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "InvalidImageName"}}}}}, ended: true, code: -1, err: true},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: c.st}
			running, end, _ := k8s.StatusOf(p, c.stopping)
			if running != c.running || (end != nil) != c.ended {
				t.Fatalf("running %v, end %+v; want running %v, ended %v", running, end, c.running, c.ended)
			}
			if end == nil {
				return
			}
			if end.ExitCode != c.code || end.Signal != c.signal || end.OOMKilled != c.oom || end.Lost != c.lost || (end.Err != nil) != c.err {
				t.Errorf("end %+v; want code %d signal %q oom %v lost %q err %v", end, c.code, c.signal, c.oom, c.lost, c.err)
			}
		})
	}
}

func TestUsableAndRegistration(t *testing.T) {
	node := func(f func(n *corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920", "rack": "r1"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.2.3"}}}}
		if f != nil {
			f(n)
		}
		return n
	}
	for name, c := range map[string]struct {
		n   *corev1.Node
		sel map[string]string
		ok  bool
	}{
		"ready with GPUs": {n: node(nil), ok: true},
		"cordoned":        {n: node(func(n *corev1.Node) { n.Spec.Unschedulable = true })},
		"not ready":       {n: node(func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })},
		"no condition":    {n: node(func(n *corev1.Node) { n.Status.Conditions = nil })},
		"no GPUs":         {n: node(func(n *corev1.Node) { delete(n.Status.Allocatable, "nvidia.com/gpu") })},
		"selector hit":    {n: node(nil), sel: map[string]string{"rack": "r1"}, ok: true},
		"selector miss":   {n: node(nil), sel: map[string]string{"rack": "r2"}},
	} {
		t.Run(name, func(t *testing.T) {
			if ok, why := k8s.Usable(c.n, c.sel); ok != c.ok {
				t.Errorf("Usable = %v (%s), want %v", ok, why, c.ok)
			}
		})
	}
	reg := k8s.Registration(node(nil), "k8s")
	if reg.NodeID != "k8s-n1" || len(reg.GPUs) != 4 || reg.GPUs[3].Model != "NVIDIA-A100-SXM4-80GB" || reg.GPUs[0].MemoryMiB != 81920 ||
		reg.Labels["pool"] != "k8s" || reg.Labels["rack"] != "r1" || reg.Address != "10.1.2.3" {
		t.Errorf("registration %+v", reg)
	}
	if _, ok := reg.Labels["nvidia.com/gpu.product"]; ok {
		t.Errorf("labels %v: Kubernetes' prefixed labels stay there", reg.Labels)
	}
}
