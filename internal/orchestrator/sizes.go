package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/sizes"
)

// Bounded memory: the byte limits of a job and of each user's live jobs
// are the feature of package sizes (o.sizes); what is left here is the
// count's start-up and the ring of ended jobs kept slim.

// recountLive counts each user's live bytes afresh from what memory
// holds: after start-up has loaded the jobs and arrays that have not
// ended.
func (o *Orchestrator) recountLive() {
	o.sizes.Reset()
	for j := range o.jobs.Unordered() {
		if j.ArrayJobID == "" && !j.State.Terminal() {
			o.sizes.Add(j.User, sizes.JobBytes(j))
		}
	}
	for rec, tmpl := range o.arr.All() {
		o.sizes.Add(rec.User, sizes.JobBytes(tmpl))
	}
}

// RecentMaxBytes is the most text (jobBytes) a job that ended keeps in
// the ring of recently ended jobs (finished.go). A larger one is kept
// there without its command, env and labels, enough for the statistics,
// log tails and dependencies that read the ring; views read it whole from
// the store. Else 4,096 jobs at the size limits would hold 1.3 GB.
const RecentMaxBytes = 4 << 10

// slimEnded is what the ring keeps of j, which has just left o.jobs: j
// itself, or a copy without its large text (slim).
func (o *Orchestrator) slimEnded(j *api.Job) (kept *api.Job, slim bool) {
	if sizes.JobBytes(j) <= RecentMaxBytes {
		return j, false
	}
	c := *j
	c.Command, c.Env, c.NodeLabels = "", nil, nil
	return &c, true
}
