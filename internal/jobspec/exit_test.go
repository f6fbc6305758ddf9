package jobspec

import (
	"errors"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestExit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		job      api.Job
		code     int
		signal   string
		startErr error
		oom      bool
		state    api.State
		reason   string
		msg      string
	}{
		{"exit 0", api.Job{}, 0, "", nil, false, api.StateCompleted, api.ReasonExited, "exit code 0"},
		{"exit 0 after an OOM kill elsewhere", api.Job{}, 0, "", nil, true, api.StateCompleted, api.ReasonExited, "exit code 0"},
		{"exit 3", api.Job{}, 3, "", nil, false, api.StateFailed, api.ReasonExitCode, "exit code 3"},
		{"a signal", api.Job{}, 143, "SIGTERM", nil, false, api.StateFailed, api.ReasonExitCode, "killed by signal (SIGTERM), exit code 143"},
		{"out of memory", api.Job{MemMiB: 2048}, 137, "SIGKILL", nil, true, api.StateFailed, api.ReasonOutOfMemory,
			"ran out of memory: the kernel killed it at its memory limit of " + MemText(2048) + " (exit code 137)"},
		{"never started", api.Job{}, -1, "", errors.New("no such image"), false, api.StateFailed, api.ReasonStartFailed, "no such image"},
		{"canceled", api.Job{CancelRequested: true}, 137, "", nil, true, api.StateCanceled, api.ReasonCanceled, "canceled while running (exit code 137)"},
		{"canceled before it started", api.Job{CancelRequested: true}, -1, "", errors.New("x"), false, api.StateCanceled, api.ReasonCanceled, "canceled while running (exit code -1)"},
	} {
		state, reason, msg := Exit(&tc.job, tc.code, tc.signal, tc.startErr, tc.oom)
		if state != tc.state || reason != tc.reason || msg != tc.msg {
			t.Errorf("%s: %s %s %q, want %s %s %q", tc.name, state, reason, msg, tc.state, tc.reason, tc.msg)
		}
	}
}
