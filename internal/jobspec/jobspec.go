// Package jobspec turns a submission into the job it describes: every
// field checked against the cluster's capacity and Corral's bounds, each
// error naming its field (422), nothing else read or changed. It is the
// first step of a submission, before the orchestrator's admission checks
// (package feature's SubmitCheck), and what a GPU hold's request is
// checked by too.
package jobspec

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/lazyre"
)

// Capacity is what the largest node offers, for validating requests.
type Capacity struct {
	Nodes       int
	MaxGPUs     int     // GPUs on the largest node
	MaxMemoryGB float64 // memory of the largest GPU
	Models      []string
	LargestNode string
	Pools       []string // Config.Pools
}

// Limits on what a submission may carry.
const (
	maxNameLen     = 256
	maxEnvVars     = 256
	maxEnvValueLen = 32 << 10
	maxRetries     = 100
	MaxUserLen     = 128
)

var (
	envName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// UserName is what a user or project may be called (at most
	// MaxUserLen bytes).
	UserName = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_.@-]*$`)
)

// reservedEnv are variables Corral sets itself.
func reservedEnv(k string) bool {
	return k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES" || k == "CUDA_DEVICE_ORDER" || strings.HasPrefix(k, "CORRAL_")
}

// Parse checks a submission against the cluster's capacity and
// returns the job it describes (without id, state or times). Every error
// names the offending field.
func Parse(req *api.SubmitRequest, c Capacity) (api.Job, error) {
	j := api.Job{
		Name: strings.TrimSpace(req.Name), User: strings.TrimSpace(req.User), Project: strings.TrimSpace(req.Project),
		Command: req.Command, Workdir: req.Workdir, Env: req.Env, GPUType: strings.TrimSpace(req.GPUType),
		GPUMemoryGB: req.GPUMemoryGB, Nodes: req.Nodes, MaxRetries: req.MaxRetries, Priority: api.PriorityNormal,
		Allocation: []api.Allocation{},
	}
	if strings.TrimSpace(j.Command) == "" && req.Script == "" { // a script's arguments may be none
		return j, api.Invalid("command", "is required and must not be empty")
	}
	if strings.ContainsRune(j.Command, 0) || !utf8.ValidString(j.Command) {
		return j, api.Invalid("command", "must be valid UTF-8 without NUL bytes")
	}
	if err := api.CheckText("name", j.Name, maxNameLen); err != nil {
		return j, err
	}
	if err := api.CheckText("gpu_type", j.GPUType, MaxUserLen); err != nil {
		return j, err
	}
	if j.User == "" {
		j.User = "anonymous"
	}
	if len(j.User) > MaxUserLen || !UserName.MatchString(j.User) {
		return j, api.Invalid("user", "%q is not a valid user name (letters, digits, '_', '.', '@', '-')", truncate(j.User, 40))
	}
	if j.Project == "" {
		j.Project = "default"
	}
	if len(j.Project) > MaxUserLen || !UserName.MatchString(j.Project) {
		return j, api.Invalid("project", "%q is not a valid project name (letters, digits, '_', '.', '@', '-')", truncate(j.Project, 40))
	}
	if j.Workdir != "" && (!filepath.IsAbs(j.Workdir) || strings.ContainsRune(j.Workdir, 0)) {
		return j, api.Invalid("workdir", "must be an absolute path, not %q", truncate(j.Workdir, 80))
	}
	if len(j.Env) > maxEnvVars {
		return j, api.Invalid("env", "has %d variables; at most %d are allowed", len(j.Env), maxEnvVars)
	}
	for k, v := range j.Env {
		if !envName.MatchString(k) {
			return j, api.Invalid("env", "%q is not a valid variable name", truncate(k, 40))
		}
		if reservedEnv(k) {
			return j, api.Invalid("env", "%s is set by Corral and cannot be given", k)
		}
		if len(v) > maxEnvValueLen || strings.ContainsRune(v, 0) {
			return j, api.Invalid("env", "the value of %s is too long or holds a NUL byte", k)
		}
	}
	if req.GPUCount == nil {
		j.GPUCount = 1
	} else {
		j.GPUCount = *req.GPUCount
	}
	if j.Nodes == 0 {
		j.Nodes = 1
	}
	if j.Nodes < 1 {
		return j, api.Invalid("nodes", "must be 1 or more, not %d", j.Nodes)
	}
	if j.Nodes > 1 && j.GPUCount == 0 {
		return j, api.Invalid("nodes", "a multi-node job needs gpu_count of at least 1 per node")
	}
	if err := validateElastic(req, &j); err != nil {
		return j, err
	}
	if err := CheckGPURequest(c, "gpu_count", j.GPUCount, j.Nodes, "gpu_memory_gb", j.GPUMemoryGB, j.GPUType); err != nil {
		return j, err
	}
	if err := validateGPUPart(req, &j); err != nil { // gpushare.go
		return j, err
	}
	if !api.IsNull(req.Priority) {
		p, err := api.ParsePriorityJSON(req.Priority)
		if err != nil {
			return j, api.Invalid("priority", "%s", err.Error())
		}
		j.Priority = p
	}
	if !api.IsNull(req.EstimatedDuration) {
		d, err := api.ParseSecondsJSON(req.EstimatedDuration)
		if err != nil {
			return j, api.Invalid("estimated_duration", "%s", err.Error())
		}
		j.EstimatedDuration = &d
	}
	if !api.IsNull(req.TimeLimit) {
		d, err := api.ParseSecondsJSON(req.TimeLimit)
		if err != nil {
			return j, api.Invalid("time_limit", "%s", err.Error())
		}
		if d.Duration() <= 0 {
			return j, api.Invalid("time_limit", "must be more than 0")
		}
		j.TimeLimit = &d
	}
	if !api.IsNull(req.PreemptGrace) {
		d, err := api.ParseSecondsJSON(req.PreemptGrace)
		if err != nil {
			return j, api.Invalid("preempt_grace", "%s", err.Error())
		}
		if d.Duration() > 24*time.Hour {
			return j, api.Invalid("preempt_grace", "must be at most 24h")
		}
		j.PreemptGrace = &d
	}
	if len(req.NodeLabels) > 32 {
		return j, api.Invalid("node_labels", "has %d labels; at most 32 are allowed", len(req.NodeLabels))
	}
	for k, v := range req.NodeLabels {
		if k == "" || len(k) > 128 || len(v) > 256 || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return j, api.Invalid("node_labels", "%q=%q is not a valid label", truncate(k, 40), truncate(v, 40))
		}
	}
	j.NodeLabels = req.NodeLabels
	if err := validatePool(req, &j, c.Pools); err != nil {
		return j, err
	}
	if err := validateImage(req, &j); err != nil {
		return j, err
	}
	if err := validateResources(req, &j); err != nil {
		return j, err
	}
	if j.MaxRetries < 0 || j.MaxRetries > maxRetries {
		return j, api.Invalid("max_retries", "must be between 0 and %d, not %d", maxRetries, j.MaxRetries)
	}
	n, err := api.ParseNotify(req.Notify)
	if err != nil {
		return j, api.Invalid("notify", "%s", err.Error())
	}
	j.Notify, j.NotifyTasks = n, req.NotifyTasks
	if j.Class, err = parseClass(req); err != nil {
		return j, err
	}
	if err := validateNotebook(req, &j); err != nil {
		return j, err
	}
	return j, nil
}

// truncate shortens s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// CheckGPURequest validates a GPU request against the cluster's capacity.
func CheckGPURequest(c Capacity, countField string, count, nodes int, memField string, memGB float64, gpuType string) error {
	if count < 0 {
		return api.Invalid(countField, "must be 0 or more, not %d", count)
	}
	if count > c.MaxGPUs {
		if c.MaxGPUs == 0 {
			return api.Invalid(countField, "asks for %d GPUs, but no node has any GPU (start corral with --simulate-gpus to try it without GPUs)", count)
		}
		return api.Invalid(countField, "asks for %d GPUs on one node; the largest possible is %d (node %s)", count, c.MaxGPUs, c.LargestNode)
	}
	if nodes > c.Nodes {
		return api.Invalid("nodes", "asks for %d nodes; the cluster has %d", nodes, c.Nodes)
	}
	if memGB < 0 || memGB != memGB {
		return api.Invalid(memField, "must be 0 or more")
	}
	if memGB > c.MaxMemoryGB && count > 0 {
		return api.Invalid(memField, "asks for %g GB per GPU; the largest GPU has %g GB", memGB, c.MaxMemoryGB)
	}
	if gpuType != "" {
		ok := false
		for _, m := range c.Models {
			ok = ok || strings.Contains(strings.ToLower(m), strings.ToLower(gpuType))
		}
		if !ok {
			return api.Invalid("gpu_type", "no node has GPUs of type %q; the cluster has %s", gpuType, fmt.Sprint(c.Models))
		}
	}
	return nil
}
