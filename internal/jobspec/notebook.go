package jobspec

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"

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
