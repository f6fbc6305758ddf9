package server

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
)

// hideScript hides a job's batch script from a caller who may not act on
// the job, as hideEnv hides its environment: a script may hold what env
// holds (a token exported in its text). Its name stays.
func hideScript(who auth.Principal, j *api.Job) {
	if j.Script != "" && !who.CanActOn(j.User, j.Project) {
		j.Script = hiddenValue
	}
}
