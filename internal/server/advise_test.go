package server

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/advise"
)

// noHistory is an AdviseSource with nothing in it.
type noHistory struct{}

func (noHistory) Runs(context.Context, time.Time, time.Time) ([]advise.Run, error) { return nil, nil }
