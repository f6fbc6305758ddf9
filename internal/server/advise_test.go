package server

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/store"
)

// noHistory is an AdviseSource with nothing in it.
type noHistory struct{}

func (noHistory) Runs(context.Context, time.Time, time.Time) ([]store.Run, error) { return nil, nil }
