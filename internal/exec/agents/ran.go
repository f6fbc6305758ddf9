package agents

// maxEndedRanks bounds how many ranks of ended gangs the pool remembers
// the nodes of, for their late log shipments: the oldest are forgotten.
const maxEndedRanks = 1 << 16

// endedRanks remembers on which node each rank of a recently ended gang
// ran. Not safe for concurrent use: the pool's lock guards it.
type endedRanks struct {
	node  map[taskKey]string
	order []taskKey // oldest first
}

// add records the nodes (by rank) of an ended attempt.
func (e *endedRanks) add(job string, attempt int, nodes []string) {
	if e.node == nil {
		e.node = map[taskKey]string{}
	}
	for r, n := range nodes {
		k := taskKey{job, attempt, r}
		e.node[k] = n
		e.order = append(e.order, k)
	}
	if over := len(e.order) - maxEndedRanks; over > 0 {
		for _, k := range e.order[:over] {
			delete(e.node, k)
		}
		e.order = append(e.order[:0:0], e.order[over:]...)
	}
}

// RanOn reports whether the pool placed the rank of the attempt on the
// node: it runs there, or ran there and ended recently. A node may ship
// log output only for such ranks (the agent API asks before it stores a
// chunk), so that an agent cannot write into other nodes' jobs' logs.
func (p *Pool) RanOn(nodeID, jobID string, attempt, rank int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g := p.gangs[gangKey{jobID, attempt}]; g != nil {
		return rank >= 0 && rank < len(g.nodes) && g.nodes[rank] == nodeID
	}
	n, ok := p.ended.node[taskKey{jobID, attempt, rank}]
	return ok && n == nodeID
}
