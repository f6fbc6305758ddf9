// Command corral is Corral's one binary: the daemons (up, server, agent) and
// the client commands (submit, queue, jobs, ...).
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:]))
}
