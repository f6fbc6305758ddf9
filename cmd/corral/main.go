// Command corral is Corral's one binary: the daemons (up, server, agent) and
// the client commands (submit, queue, jobs, ...).
package main

import (
	"os"
)

func main() {
	closeInheritedOnExec()    // fds.go: no inherited descriptor reaches a job
	hangUpChildrenByDefault() // hangup.go: nor an ignored SIGHUP
	os.Exit(run(os.Args[1:]))
}
