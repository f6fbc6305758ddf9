package orchestrator

import (
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/lazyre"
)

// Limits on what a submission may carry.
const (
	maxNameLen     = 256
	maxEnvVars     = 256
	maxEnvValueLen = 32 << 10
	maxRetries     = 100
	maxUserLen     = 128
)

var (
	envName  = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	userName = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_.@-]*$`)
)

// reservedEnv are variables Corral sets itself.
func reservedEnv(k string) bool {
	return k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES" || k == "CUDA_DEVICE_ORDER" || strings.HasPrefix(k, "CORRAL_")
}

// validateSubmit checks a submission against the cluster's capacity and
// returns the job it describes (without id, state or times). Every error
// names the offending field.
func validateSubmit(req *api.SubmitRequest, c Capacity) (api.Job, error) {
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
	if err := api.CheckText("gpu_type", j.GPUType, maxUserLen); err != nil {
		return j, err
	}
	if j.User == "" {
		j.User = "anonymous"
	}
	if len(j.User) > maxUserLen || !userName.MatchString(j.User) {
		return j, api.Invalid("user", "%q is not a valid user name (letters, digits, '_', '.', '@', '-')", truncate(j.User, 40))
	}
	if j.Project == "" {
		j.Project = "default"
	}
	if len(j.Project) > maxUserLen || !userName.MatchString(j.Project) {
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
	if err := checkGPURequest(c, "gpu_count", j.GPUCount, j.Nodes, "gpu_memory_gb", j.GPUMemoryGB, j.GPUType); err != nil {
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
	if err := validatePool(req, &j, c.Pools); err != nil { // pools.go
		return j, err
	}
	if err := validateImage(req, &j); err != nil { // image.go
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
	if j.Class, err = parseClass(req); err != nil { // interactive.go
		return j, err
	}
	if err := validateNotebook(req, &j); err != nil {
		return j, err
	}
	return j, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
