package server

import (
	"context"
	"net"
)

// NodeDialer connects to a loopback port on the node of a running job
// (its rank 0), through the server's tunnel to that node: the notebook
// proxy's way to a notebook server. The node's agent dials only
// 127.0.0.1, and only for a job that runs there. *Server implements it
// (shell.go) for the local node of `corral up` and for remote agents.
type NodeDialer interface {
	DialJobPort(ctx context.Context, jobID string, port int) (net.Conn, error)
}

var _ NodeDialer = (*Server)(nil)
