package jobspec

import (
	"errors"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestPriority(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		want   api.Priority
		status int
	}{
		{`"high"`, api.PriorityHigh, 0},
		{`null`, 0, 422},
		{``, 0, 422},
		{`"urgent-ish"`, 0, 422},
	} {
		p, err := Priority(api.RawValue(tc.raw))
		var ae *api.Error
		switch {
		case tc.status == 0 && (err != nil || p != tc.want):
			t.Errorf("%s: %v %v, want %v", tc.raw, p, err, tc.want)
		case tc.status != 0 && (!errors.As(err, &ae) || ae.Status != tc.status || ae.Field != "priority"):
			t.Errorf("%s: err %v, want %d naming priority", tc.raw, err, tc.status)
		}
	}
}

func TestNotEnded(t *testing.T) {
	for _, tc := range []struct {
		state api.State
		ended bool
	}{
		{api.StateQueued, false},
		{api.StateRunning, false},
		{api.StateCompleted, true},
		{api.StateCanceled, true},
	} {
		err := NotEnded(&api.Job{ID: "j1", State: tc.state})
		var ae *api.Error
		if tc.ended != (err != nil) || tc.ended && (!errors.As(err, &ae) || ae.Code != "wrong_state") {
			t.Errorf("%s: %v", tc.state, err)
		}
	}
}
