package jobspec

import (
	"maps"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/lazyre"
)

// PoolLabel is the node label that names a node's pool.
const PoolLabel = "pool"

// poolName is what a pool may be called.
var poolName = lazyre.New(`^[a-z][a-z0-9_-]{0,31}$`)

// validatePool checks the submission's pool and makes it the job's node
// label requirement pool=NAME. pools are the server's pools (Config.Pools);
// empty: any well-formed name. It changes nothing on error.
func validatePool(req *api.SubmitRequest, j *api.Job, pools []string) error {
	p := req.Pool
	if p == "" {
		return nil
	}
	if !poolName.MatchString(p) {
		return api.Invalid("pool", "%q is not a pool name (lower-case letters, digits, '_' and '-', at most 32)", truncate(p, 40))
	}
	if len(pools) > 0 && !slices.Contains(pools, p) {
		return api.Invalid("pool", "no pool %q on this server; its pools: %s", p, strings.Join(pools, ", "))
	}
	if v, ok := req.NodeLabels[PoolLabel]; ok && v != p {
		return api.Invalid("pool", "pool %q and node label pool=%s disagree", p, v)
	}
	labels := maps.Clone(j.NodeLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[PoolLabel] = p
	j.Pool, j.NodeLabels = p, labels
	return nil
}
