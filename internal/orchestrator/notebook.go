package orchestrator

import (
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// notebookEnv gives a notebook job's task environment (env, the task's
// own copy) the attempt's port and the attempt's secret.
func notebookEnv(j *api.Job, env map[string]string) map[string]string {
	if env == nil {
		env = map[string]string{}
	}
	env[api.NotebookPortVar] = strconv.Itoa(api.NotebookPort(j.ID, j.RetryCount))
	env[api.NotebookTokenVar] = api.NotebookSecret(j.Env[api.NotebookTokenVar], j.RetryCount)
	return env
}

// notebookSlice gives a notebook the server's default MIG slice
// (Config.NotebookMIG) when it asks for 1 GPU and nothing more precise
// (no type, memory, slice or share) and some GPU offers that profile.
// Write lock held (or the loop).
func (o *Orchestrator) notebookSlice(j *api.Job) {
	p := o.cfg.NotebookMIG
	if p == "" || !j.Notebook || j.Partial() || j.GPUCount != 1 || j.Nodes > 1 || j.GPUType != "" || j.GPUMemoryGB > 0 || j.GPUCountMin > 0 {
		return
	}
	if slices.ContainsFunc(o.gpus.Profiles(), func(x string) bool { return strings.EqualFold(x, p) }) {
		j.MIGProfile = p
	}
}
