package agents

// RankNode returns the node that runs the rank of the job's live attempt,
// and that attempt (for `corral shell` and the notebook proxy's streams).
// ok is false when no attempt of the job is placed, or it has no such
// rank.
func (p *Pool) RankNode(jobID string, rank int) (node string, attempt int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	attempt = -1
	for k, g := range p.gangs {
		if k.job == jobID && k.attempt > attempt && rank >= 0 && rank < len(g.nodes) {
			node, attempt, ok = g.nodes[rank], k.attempt, true
		}
	}
	return node, attempt, ok
}
