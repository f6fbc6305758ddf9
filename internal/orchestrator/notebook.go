package orchestrator

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"

	"github.com/corral-sched/corral/internal/api"
)

// validateNotebook checks a notebook submission and gives the job the
// secret its notebook server will ask of the proxy (api.NotebookTokenVar).
// A notebook runs on one node and is no array.
func validateNotebook(req *api.SubmitRequest, j *api.Job) error {
	if !req.Notebook {
		return nil
	}
	if j.Nodes > 1 {
		return api.Invalid("notebook", "a notebook runs on one node, not %d (nodes)", j.Nodes)
	}
	if req.Array != "" {
		return api.Invalid("notebook", "a notebook cannot be a job array")
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("notebook token: %w", err)
	}
	j.Env = maps.Clone(j.Env)
	if j.Env == nil {
		j.Env = map[string]string{}
	}
	j.Env[api.NotebookTokenVar] = hex.EncodeToString(b[:])
	j.Notebook = true
	return nil
}

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
