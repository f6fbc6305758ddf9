package export

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/k8s/pod"
)

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// Kubernetes returns the Pods (and, for several nodes, the headless
// Service) that Corral's Kubernetes executor submits for the job's first
// attempt: package pod builds both, so the two cannot drift. GPUs per
// pod are nvidia.com/gpu limits, the GPU type and node labels are a
// nodeSelector (the executor binds each pod with spec.nodeName to the
// node Corral's core chose; an exported pod is left to the Kubernetes
// scheduler), the time limit is activeDeadlineSeconds with a minute's
// slack. Retries are not a pod's: they are written as a comment.
func Kubernetes(j api.Job, o Options) string {
	image := j.Image
	if image == "" {
		image = o.Image
	}
	var b strings.Builder
	for _, note := range notes(j) {
		b.WriteString("# " + note + "\n")
	}
	if j.MaxRetries > 0 {
		fmt.Fprintf(&b, "# Corral retries: %d (a pod is not retried by Kubernetes: Corral's executor creates the next attempt's pods)\n", j.MaxRetries)
	}
	if image == "" {
		image = DefaultImage
		fmt.Fprintf(&b, "# the image is a placeholder (%s): Corral runs commands on the host; put the job's image here\n", image)
	}
	sel := maps.Clone(j.NodeLabels)
	if j.GPUType != "" {
		if sel == nil {
			sel = map[string]string{}
		}
		sel["nvidia.com/gpu.product"] = j.GPUType
	}
	t := exec.Task{JobID: j.ID, User: j.User, Command: j.Command, Script: j.Script, Workdir: j.Workdir, Env: map[string]string{},
		MemMiB: j.MemMiB, CPUs: float64(j.CPUs), Image: image}
	for _, k := range sortedEnv(j) {
		t.Env[k] = j.Env[k]
	}
	if j.TimeLimit != nil {
		t.TimeLimit = time.Duration(float64(*j.TimeLimit) * float64(time.Second))
	}
	for range nodes(j) {
		r := exec.Rank{}
		for g := range j.GPUCount {
			r.GPUs = append(r.GPUs, g)
		}
		t.Ranks = append(t.Ranks, r)
	}
	a := pod.Build(t, pod.Options{NodeSelector: sel})
	var objs []any
	if a.Service != nil {
		objs = append(objs, a.Service)
	}
	for _, p := range a.Pods {
		objs = append(objs, p)
	}
	for i, obj := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(obj)
		if err != nil { // plain structs: cannot happen
			fmt.Fprintf(&b, "# %v\n", err)
			continue
		}
		b.Write(y)
	}
	return b.String()
}
