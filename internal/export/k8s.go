package export

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// yq quotes s as a YAML scalar (a JSON string is a YAML double-quoted one).
func yq(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// k8sName turns an id into a DNS-1123 label (lower case, digits, '-', at
// most 63 characters), as Job and Service names must be.
func k8sName(s string) string {
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
	if len(n) > 52 { // room for the pods' "-<index>-<suffix>"
		n = strings.TrimRight(n[:52], "-")
	}
	if n == "" {
		n = "corral-job"
	}
	return n
}

// Kubernetes returns a batch/v1 Job manifest: GPUs per pod as
// nvidia.com/gpu limits, node labels as its nodeSelector (and the GPU
// type as nvidia.com/gpu.product), the time limit as activeDeadlineSeconds
// and retries as backoffLimit. A multi-node job is an Indexed Job of one
// pod per node (parallelism = completions = nodes) with a headless
// Service, so rank 0 is reached as <job>-0.<job>: Corral's rank variables
// come from JOB_COMPLETION_INDEX.
func Kubernetes(j api.Job, o Options) string {
	image := o.Image
	if image == "" {
		image = DefaultImage
	}
	name := k8sName("corral-" + j.ID)
	n := nodes(j)
	var b strings.Builder
	for _, note := range notes(j) {
		b.WriteString("# " + note + "\n")
	}
	if o.Image == "" {
		fmt.Fprintf(&b, "# the image is a placeholder (%s): Corral runs commands on the host; put the job's image here\n", image)
	}
	if n > 1 {
		fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata:
  name: %s
spec:
  clusterIP: None
  selector:
    job-name: %s
---
`, name, name)
	}
	fmt.Fprintf(&b, `apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  labels:
    corral/job-id: %s
spec:
  backoffLimit: %d
`, name, yq(j.ID), j.MaxRetries)
	if j.TimeLimit != nil {
		secs := int64(*j.TimeLimit)
		if float64(secs) < float64(*j.TimeLimit) {
			secs++
		}
		fmt.Fprintf(&b, "  activeDeadlineSeconds: %d\n", secs)
	}
	if n > 1 {
		fmt.Fprintf(&b, "  completions: %d\n  parallelism: %d\n  completionMode: Indexed\n", n, n)
	}
	b.WriteString("  template:\n    metadata:\n      labels:\n        corral/job-id: " + yq(j.ID) + "\n    spec:\n      restartPolicy: Never\n")
	if n > 1 {
		fmt.Fprintf(&b, "      subdomain: %s\n", name)
	}
	sel := maps.Clone(j.NodeLabels)
	if j.GPUType != "" {
		if sel == nil {
			sel = map[string]string{}
		}
		sel["nvidia.com/gpu.product"] = j.GPUType
	}
	if len(sel) > 0 {
		b.WriteString("      nodeSelector:\n")
		for _, k := range sortedKeys(sel) {
			fmt.Fprintf(&b, "        %s: %s\n", yq(k), yq(sel[k]))
		}
	}
	fmt.Fprintf(&b, "      containers:\n      - name: main\n        image: %s\n", yq(image))
	rank, master := "0", "127.0.0.1"
	if n > 1 {
		rank, master = "$JOB_COMPLETION_INDEX", name+"-0."+name
	}
	script := rankScript(rank, fmt.Sprint(n), master, masterPort, j.Command)
	fmt.Fprintf(&b, "        command: [\"/bin/sh\", \"-c\", %s]\n", yq(script))
	if j.Workdir != "" {
		fmt.Fprintf(&b, "        workingDir: %s\n", yq(j.Workdir))
	}
	if env := sortedEnv(j); len(env) > 0 {
		b.WriteString("        env:\n")
		for _, k := range env {
			fmt.Fprintf(&b, "        - name: %s\n          value: %s\n", k, yq(j.Env[k]))
		}
	}
	b.WriteString("        resources:\n          limits:\n")
	if j.GPUCount > 0 {
		fmt.Fprintf(&b, "            nvidia.com/gpu: %d\n", j.GPUCount)
	}
	if c := cpus(j); c > 0 {
		fmt.Fprintf(&b, "            cpu: %s\n", yq(fmt.Sprint(j.CPUs)))
	}
	if j.MemMiB > 0 {
		fmt.Fprintf(&b, "            memory: %dMi\n", j.MemMiB)
	}
	if j.GPUCount == 0 && j.CPUs == 0 && j.MemMiB == 0 {
		b.WriteString("            {}\n")
	}
	return b.String()
}
