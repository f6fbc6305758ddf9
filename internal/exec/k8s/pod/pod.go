// Package pod builds the Kubernetes objects of one attempt of a Corral
// job: one Pod per rank, bound to its node, and for a gang a headless
// Service that names rank 0. The Kubernetes executor submits exactly these
// objects and `corral export k8s` prints them, so the two cannot drift.
//
// The package depends on k8s.io/api types only (no client), so that the
// CLI's export stays light.
package pod

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/batchscript"
	"github.com/corral-sched/corral/internal/exec"
)

// The labels every object of an attempt carries; the executor finds its
// pods by them after a restart (adoption).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "corral"
	LabelJob       = "corral.dev/job-id"
	LabelAttempt   = "corral.dev/attempt"
	LabelRank      = "corral.dev/rank"
	LabelUser      = "corral.dev/user"
	// AnnotationNode is the Corral node id of the pod's rank.
	AnnotationNode = "corral.dev/node-id"
)

// ResourceGPU is the extended resource of NVIDIA's device plugin.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// Container is the name of the attempt's container in each pod.
const Container = "main"

// Options are what an attempt's pods need beyond the task.
type Options struct {
	// Namespace of the pods and the Service.
	Namespace string
	// Image runs tasks that name none (Task.Image).
	Image string
	// NodeSelector is added to every pod (e.g. a node pool's label).
	NodeSelector map[string]string
	// Grace is the pods' terminationGracePeriodSeconds; 0: Kubernetes'
	// default (30s). A stop sets its own on the delete.
	Grace time.Duration
	// NodeName maps a Corral node id to the Kubernetes node's name; nil or
	// an empty answer leaves the pod unbound (export: not placed yet).
	NodeName func(nodeID string) string
}

// Attempt is what one attempt submits.
type Attempt struct {
	Pods    []*corev1.Pod   // rank 0 first
	Service *corev1.Service // a gang's headless Service; nil for one node
}

// Name turns s into a DNS-1123 label: lower case letters, digits and '-',
// at most max characters, starting and ending with an alphanumeric.
func Name(s string, max int) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	n := strings.Trim(b.String(), "-")
	if len(n) > max {
		n = strings.TrimRight(n[:max], "-")
	}
	if n == "" {
		n = "corral"
	}
	return n
}

// AttemptName is the name of an attempt's Service, and the stem of its
// pods' names.
func AttemptName(jobID string, attempt int) string {
	suffix := "-" + strconv.Itoa(attempt)
	return Name("corral-"+jobID, 55-len(suffix)) + suffix
}

// PodName is the name of rank r's pod.
func PodName(jobID string, attempt, rank int) string {
	return AttemptName(jobID, attempt) + "-" + strconv.Itoa(rank)
}

// labelValue turns s into a valid label value (at most 63 characters of
// letters, digits, '-', '_' and '.', alphanumeric at both ends).
func labelValue(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	v := b.String()
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-_.")
}

// Labels are the labels of an attempt's objects (rank < 0: the Service's,
// without a rank).
func Labels(t exec.Task, rank int) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelJob: labelValue(t.JobID), LabelAttempt: strconv.Itoa(t.Attempt)}
	if rank >= 0 {
		l[LabelRank] = strconv.Itoa(rank)
	}
	if u := labelValue(t.User); u != "" {
		l[LabelUser] = u
	}
	return l
}

// Ranks lists a task's ranks (a task without Ranks is one rank on NodeID).
func Ranks(t exec.Task) []exec.Rank {
	if len(t.Ranks) > 0 {
		return t.Ranks
	}
	return []exec.Rank{{NodeID: t.NodeID, GPUs: t.GPUs, GPUUUIDs: t.GPUUUIDs}}
}

// MasterAddr is CORRAL_MASTER_ADDR of an attempt over n nodes: the gang's
// Service name (its DNS name in the namespace resolves to rank 0's pod),
// or 127.0.0.1 for one node.
func MasterAddr(jobID string, attempt, n int) string {
	if n > 1 {
		return AttemptName(jobID, attempt)
	}
	return "127.0.0.1"
}

// Build returns the objects of attempt t. The pods are bound to their
// nodes (spec.nodeName, from o.NodeName): Corral's core chose them, the
// Kubernetes scheduler is not asked. Pure: the same task gives the same
// objects.
func Build(t exec.Task, o Options) Attempt {
	ranks := Ranks(t)
	image := t.Image
	if image == "" {
		image = o.Image
	}
	cmd := t.Command
	if t.Script != "" { // a batch script: run by its own #! line
		cmd = batchscript.ShellCommand(t.Script, t.Command)
	}
	port := api.MasterPort(t.JobID, t.Attempt)
	master := MasterAddr(t.JobID, t.Attempt, len(ranks))
	var out Attempt
	for r, rk := range ranks {
		env := maps.Clone(t.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, map[string]string{
			"CORRAL_JOB_ID": t.JobID, "CORRAL_ATTEMPT": strconv.Itoa(t.Attempt), "CORRAL_NODE_ID": rk.NodeID,
			"CORRAL_NUM_GPUS": strconv.Itoa(len(rk.GPUs)), "CORRAL_NODE_RANK": strconv.Itoa(r), "CORRAL_NUM_NODES": strconv.Itoa(len(ranks)),
			"CORRAL_MASTER_ADDR": master, "CORRAL_MASTER_PORT": strconv.Itoa(port),
			"MASTER_ADDR": master, "MASTER_PORT": strconv.Itoa(port), "NODE_RANK": strconv.Itoa(r),
		})
		var vars []corev1.EnvVar
		for _, k := range slices.Sorted(maps.Keys(env)) {
			vars = append(vars, corev1.EnvVar{Name: k, Value: env[k]})
		}
		limits := corev1.ResourceList{}
		if len(rk.GPUs) > 0 {
			limits[ResourceGPU] = *resource.NewQuantity(int64(len(rk.GPUs)), resource.DecimalSI)
		}
		if t.CPUs > 0 {
			limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(t.CPUs*1000+0.5), resource.DecimalSI)
		}
		if t.MemMiB > 0 {
			limits[corev1.ResourceMemory] = *resource.NewQuantity(t.MemMiB<<20, resource.BinarySI)
		}
		no := false
		p := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: PodName(t.JobID, t.Attempt, r), Namespace: o.Namespace,
				Labels: Labels(t, r), Annotations: map[string]string{AnnotationNode: rk.NodeID}},
			Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				NodeSelector:                 maps.Clone(o.NodeSelector),
				EnableServiceLinks:           &no, // the job's env is the job's (docs/jobs.md)
				AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{
					Name: Container, Image: image,
					Command:    []string{"/bin/sh", "-c", cmd},
					WorkingDir: t.Workdir,
					Env:        vars,
					Resources:  corev1.ResourceRequirements{Limits: limits},
				}},
			},
		}
		if o.NodeName != nil {
			p.Spec.NodeName = o.NodeName(rk.NodeID)
		}
		if t.TimeLimit > 0 {
			// A backstop a minute after the limit, at which the
			// orchestrator stops the attempt itself (the pod then ends
			// with reason DeadlineExceeded: time_limit).
			d := int64((t.TimeLimit+time.Second-1)/time.Second) + 60
			p.Spec.ActiveDeadlineSeconds = &d
		}
		if o.Grace > 0 {
			g := int64((o.Grace + time.Second - 1) / time.Second)
			p.Spec.TerminationGracePeriodSeconds = &g
		}
		if len(ranks) > 1 {
			// The pod's own DNS name is <hostname>.<subdomain>; the
			// Service selects rank 0 for CORRAL_MASTER_ADDR.
			p.Spec.Hostname, p.Spec.Subdomain = fmt.Sprintf("rank-%d", r), master
		}
		out.Pods = append(out.Pods, p)
	}
	if len(ranks) > 1 {
		sel := Labels(t, 0)
		delete(sel, LabelUser)
		out.Service = &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: master, Namespace: o.Namespace, Labels: Labels(t, -1)},
			Spec: corev1.ServiceSpec{
				ClusterIP:                corev1.ClusterIPNone,
				Selector:                 sel,
				PublishNotReadyAddresses: true, // rank 0 resolves as soon as it has an IP
				Ports:                    []corev1.ServicePort{{Name: "master", Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
			},
		}
	}
	return out
}
