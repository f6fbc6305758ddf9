package agent

import (
	"fmt"

	"github.com/corral-sched/corral/internal/diskfree"
)

// An agent whose log disk (the file system of Config.LogDir) has less
// free than Config.MinFreeDisk percent says so in each report
// (api.AgentReport.DiskFull): the server then places no new jobs on the
// node, and waiting jobs say why (node_disk_full). Running jobs go on;
// their logs lose output with a marker if the disk does fill
// (logcap.go).

// diskFull returns why the log disk is too full for new jobs, or "" when
// it is not (or the check is off, or the disk cannot be read: a failed
// check does not stop the node).
func (a *Agent) diskFull() string {
	if a.cfg.MinFreeDisk <= 0 {
		return ""
	}
	free, err := diskfree.Percent(a.cfg.LogDir)
	if err != nil {
		a.log.Warn("cannot tell the log disk's free space", "err", err)
		return ""
	}
	if free >= a.cfg.MinFreeDisk {
		return ""
	}
	return fmt.Sprintf("its log disk (%s) has %.1f%% free, under --min-free-disk %g%%", a.cfg.LogDir, free, a.cfg.MinFreeDisk)
}
