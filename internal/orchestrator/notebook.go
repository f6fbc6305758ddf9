package orchestrator

import (
	"strconv"

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
