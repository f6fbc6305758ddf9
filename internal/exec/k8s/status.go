package k8s

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/k8s/pod"
)

// The reasons Kubernetes gives for a pod it ended itself.
const (
	reasonEvicted      = "Evicted"  // the kubelet, under node pressure
	reasonNodeLost     = "NodeLost" // the node stopped reporting
	reasonOOMKilled    = "OOMKilled"
	reasonDeadline     = "DeadlineExceeded" // activeDeadlineSeconds passed
	reasonNodeShutdown = "Terminated"       // graceful node shutdown
	// DisruptionTarget reasons (pod condition).
	disruptionTaint = "DeletionByTaintManager" // NoExecute taint: the node is gone or drained
)

// StatusOf reads a pod: whether its container runs (or ran), its end once
// it ended (nil before), and the image's digest. stopping says Corral
// asked for the stop, so that a disruption is not taken for a loss.
//
// Mapping: the container's exit code (128+N named by signal N); reason
// OOMKilled sets OOMKilled; a pod the kubelet evicted, or one ended by a
// lost node (status reason NodeLost, a NoExecute taint), is Lost
// (lost / node_lost) so that the orchestrator requeues it; a container
// that cannot be created (a bad image name) ends with Err.
func StatusOf(p *corev1.Pod, stopping bool) (running bool, end *exec.Update, digest string) {
	var cs *corev1.ContainerStatus
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == pod.Container {
			cs = &p.Status.ContainerStatuses[i]
		}
	}
	lost := ""
	if !stopping {
		switch {
		case p.Status.Reason == reasonNodeLost || p.Status.Reason == reasonNodeShutdown || disrupted(p) == disruptionTaint:
			lost = api.ReasonNodeLost
		case p.Status.Reason == reasonEvicted || disrupted(p) != "":
			lost = api.ReasonLost
		}
	}
	if cs != nil {
		digest = cs.ImageID
		switch st := cs.State; {
		case st.Running != nil:
			running = true
		case st.Terminated != nil:
			running = true
			u := exitOf(st.Terminated)
			u.TimedOut = p.Status.Reason == reasonDeadline
			if lost != "" {
				u.Lost = lost
				u.Err = fmt.Errorf("k8s: pod %s/%s ended by Kubernetes: %s %s", p.Namespace, p.Name, p.Status.Reason, p.Status.Message)
			}
			return running, &u, digest
		case st.Waiting != nil:
			switch st.Waiting.Reason {
			case "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError":
				return false, &exec.Update{ExitCode: -1, Err: fmt.Errorf("k8s: pod %s/%s cannot start: %s: %s", p.Namespace, p.Name, st.Waiting.Reason, st.Waiting.Message)}, digest
			}
		}
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		// Ended without a container status: evicted or lost before its
		// container ran, or a status the kubelet never wrote.
		if lost == "" {
			lost = api.ReasonLost
		}
		return running, &exec.Update{ExitCode: -1, Lost: lost,
			Err: fmt.Errorf("k8s: pod %s/%s %s without a container status: %s %s", p.Namespace, p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message)}, digest
	}
	return running, nil, digest
}

// disrupted returns the reason of the pod's DisruptionTarget condition.
func disrupted(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

// exitOf is the Exited update of a terminated container.
func exitOf(t *corev1.ContainerStateTerminated) exec.Update {
	u := exec.Update{ExitCode: int(t.ExitCode), OOMKilled: t.Reason == reasonOOMKilled}
	sig := int(t.Signal)
	if sig == 0 && t.ExitCode > 128 && t.ExitCode < 128+65 {
		sig = int(t.ExitCode) - 128
	}
	if sig > 0 {
		u.ExitCode, u.Signal = 128+sig, exec.SignalName(sig)
	}
	return u
}
