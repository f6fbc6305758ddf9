package jobspec

import (
	"fmt"

	"github.com/corral-sched/corral/internal/api"
)

// Exit is the state, reason and message that the end of job j's attempt
// gives, when no feature stopped it (a time limit, a booking's end, idle
// reclaim say their own): canceled when a cancel was asked, failed when
// it never started (startErr), completed on exit code 0, else failed,
// out_of_memory when the OOM killer acted in its cgroup, naming the
// signal that killed it when one did.
func Exit(j *api.Job, code int, signal string, startErr error, oomKilled bool) (api.State, string, string) {
	switch {
	case j.CancelRequested:
		return api.StateCanceled, api.ReasonCanceled, fmt.Sprintf("canceled while running (exit code %d)", code)
	case startErr != nil:
		return api.StateFailed, api.ReasonStartFailed, startErr.Error()
	case code == 0:
		return api.StateCompleted, api.ReasonExited, "exit code 0"
	case oomKilled:
		return api.StateFailed, api.ReasonOutOfMemory, fmt.Sprintf("ran out of memory: the kernel killed it at its memory limit of %s (exit code %d)", MemText(j.MemMiB), code)
	case signal != "":
		return api.StateFailed, api.ReasonExitCode, fmt.Sprintf("killed by signal (%s), exit code %d", signal, code)
	default:
		return api.StateFailed, api.ReasonExitCode, fmt.Sprintf("exit code %d", code)
	}
}
