package sim

import "strconv"

// NodeID names the simulator's n-th node (0-based).
func NodeID(n int) string { return "n" + strconv.Itoa(n+1) }

// Gang splits a request for gpus GPUs on nodes of nodeGPUs each: on one
// node when it fits, else on the fewest nodes that share it evenly (16 on
// 8-GPU nodes: 2 x 8; 12: 2 x 6).
func Gang(gpus, nodeGPUs int) (perNode, nodes int) {
	if gpus <= nodeGPUs {
		return gpus, 1
	}
	n := (gpus + nodeGPUs - 1) / nodeGPUs
	for gpus%n != 0 {
		n++
	}
	return gpus / n, n
}

// allocated is how many GPUs are allocated now: whole ones, and those in
// MIG mode with a slice held (mig.go).
func (s *sim) allocated() int {
	n := s.migBusy - s.migGPUs // MIG GPUs are out of nfree; those with a slice held count
	for i := range s.nfree {
		n += s.cfg.NodeGPUs - s.nfree[i]
	}
	return n
}
