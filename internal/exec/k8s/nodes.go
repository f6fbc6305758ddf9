package k8s

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec/k8s/pod"
)

// The labels NVIDIA's GPU Feature Discovery sets on a node.
const (
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUMemory  = "nvidia.com/gpu.memory" // MiB per GPU
)

// NodeID is the Corral node id of the Kubernetes node called name.
func NodeID(name string) string { return NodePrefix + name }

// NodeName is the Kubernetes node name of a Corral node id ("" for an id
// that is not one of the cluster's).
func NodeName(id string) string {
	n, ok := strings.CutPrefix(id, NodePrefix)
	if !ok {
		return ""
	}
	return n
}

// Owns reports whether a Corral node id names a Kubernetes node (the
// router of a mixed cluster asks).
func Owns(id string) bool { return strings.HasPrefix(id, NodePrefix) }

// Usable reports whether Corral may place work on n: Ready, schedulable,
// with allocatable GPUs, and matching sel. why says what is missing.
func Usable(n *corev1.Node, sel map[string]string) (ok bool, why string) {
	switch {
	case n.Spec.Unschedulable:
		return false, "unschedulable (cordoned)"
	case !ready(n):
		return false, "not Ready"
	case gpus(n) == 0:
		return false, "no allocatable " + string(pod.ResourceGPU)
	case !labels.SelectorFromSet(sel).Matches(labels.Set(n.Labels)):
		return false, "does not match the node selector"
	}
	return true, ""
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func gpus(n *corev1.Node) int {
	q, ok := n.Status.Allocatable[pod.ResourceGPU]
	if !ok {
		return 0
	}
	return int(q.Value())
}

// Registration is what the orchestrator is told of node n: one GPU per
// allocatable nvidia.com/gpu, their model and memory from GPU Feature
// Discovery's labels, the node's labels with pool=<pool> over them.
func Registration(n *corev1.Node, pool string) api.AgentRegistration {
	mem, _ := strconv.ParseInt(n.Labels[LabelGPUMemory], 10, 64)
	reg := api.AgentRegistration{NodeID: NodeID(n.Name), Hostname: n.Name, Labels: map[string]string{},
		GPUs: []api.AgentGPU{}, Containment: api.ContainProcessGroup, Tasks: []api.TaskStatus{}}
	for k, v := range n.Labels {
		if !strings.Contains(k, "/") { // kubernetes.io/... and vendors' labels stay in Kubernetes
			reg.Labels[k] = v
		}
	}
	reg.Labels["pool"] = pool
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && reg.Address == "" {
			reg.Address = a.Address
		}
	}
	for i := range gpus(n) {
		reg.GPUs = append(reg.GPUs, api.AgentGPU{Index: i, Model: n.Labels[LabelGPUProduct], MemoryMiB: mem})
	}
	return reg
}

// fingerprint is what makes a registration worth repeating.
func fingerprint(r api.AgentRegistration) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		kv = append(kv, k+"="+r.Labels[k])
	}
	model, mem := "", int64(0)
	if len(r.GPUs) > 0 {
		model, mem = r.GPUs[0].Model, r.GPUs[0].MemoryMiB
	}
	return fmt.Sprintf("%s|%d|%s|%d|%s", r.Address, len(r.GPUs), model, mem, strings.Join(kv, ","))
}

// nodesChanged reads the node informer's cache and tells the orchestrator
// of new or changed usable nodes; a node that stopped being usable goes
// down at once.
func (e *Executor) nodesChanged() {
	ctx := context.Background()
	now := e.cfg.Now()
	objs := e.nodeInf.GetStore().List()
	usable := map[string]*corev1.Node{}
	for _, o := range objs {
		n, ok := o.(*corev1.Node)
		if !ok {
			continue
		}
		if ok, why := Usable(n, e.cfg.NodeSelector); !ok {
			e.mu.Lock()
			was := e.ready[NodeID(n.Name)]
			e.ready[NodeID(n.Name)] = false
			e.mu.Unlock()
			if was {
				e.log.Info("Kubernetes node not usable", "node", n.Name, "why", why)
				e.cfg.Book.NodeDown(NodeID(n.Name), now)
			}
			continue
		}
		usable[NodeID(n.Name)] = n
	}
	for id, n := range usable {
		reg := Registration(n, e.cfg.Pool)
		fp := fingerprint(reg)
		e.mu.Lock()
		same := e.known[id] == fp
		e.mu.Unlock()
		if !same {
			if err := e.cfg.Book.RegisterNode(ctx, reg, reg.Address); err != nil {
				e.log.Warn("Kubernetes node not registered", "node", n.Name, "err", err)
				continue
			}
			e.log.Info("Kubernetes node registered", "node", n.Name, "gpus", len(reg.GPUs), "model", n.Labels[LabelGPUProduct])
		}
		e.mu.Lock()
		e.known[id], e.ready[id] = fp, true
		e.mu.Unlock()
		e.cfg.Book.NodeSeen(id, nil, nil, now)
	}
}

// nodeDeleted marks a node that left the cluster down, and ends the
// attempts that ran there: their pods went with it (node_lost).
func (e *Executor) nodeDeleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	id := NodeID(n.Name)
	e.mu.Lock()
	e.ready[id] = false
	delete(e.known, id)
	var lost []key
	for k, a := range e.tasks {
		for r, rk := range pod.Ranks(a.task) {
			if rk.NodeID == id && a.ranks[r].end == nil {
				lost = append(lost, k)
				break
			}
		}
	}
	e.mu.Unlock()
	e.log.Warn("Kubernetes node deleted", "node", n.Name, "attempts", len(lost))
	e.cfg.Book.NodeDown(id, e.cfg.Now())
	for _, k := range lost {
		e.lose(k, api.ReasonNodeLost, false, fmt.Errorf("k8s: node %s was deleted from the cluster", n.Name))
	}
}

// Unreachable says whether err means the API server could not be asked
// (as opposed to an answer, even a refusal).
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH):
		return true
	case errors.As(err, &ne), errors.As(err, &ue):
		return true
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err):
		return true
	}
	return false
}
