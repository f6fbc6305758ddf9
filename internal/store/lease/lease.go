// Package lease elects one leader among servers sharing one database,
// with the lease row of the store (store.AcquireLease): a TTL, and an
// epoch that only grows. The leader renews at a third of the TTL and
// stops trusting its lease before the TTL ends (Leading turns false at
// 2/3 of the TTL after the start of its last successful renewal, leaving
// a third for clock skew and a slow database). Its writes are fenced by
// the epoch (store.Fence): once another server holds the lease, the old
// leader's commits fail inside their own transactions and it steps down
// at once. No session advisory lock is used.
package lease

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Backend is the lease row: *store.Store, or Fake.
type Backend interface {
	// AcquireLease takes the lease for holder (epoch 0) or renews it
	// (epoch: the one held), until now+ttl; see store.AcquireLease.
	AcquireLease(ctx context.Context, holder string, epoch int64, now time.Time, ttl time.Duration) (int64, bool, error)
	ReleaseLease(ctx context.Context, holder string, epoch int64) error
}

// Config configures an Elector.
type Config struct {
	Backend Backend
	Holder  string        // this server's name, unique among them (e.g. its address and a random suffix)
	TTL     time.Duration // how long a lease lasts without renewal
	Now     func() time.Time
	Logger  *slog.Logger
	// OnElected is called (from Run's goroutine) when this server takes
	// the lease with a new epoch; OnDeposed when it stops trusting it
	// (a renewal failed in time, or Deposed was called).
	OnElected func(epoch int64)
	OnDeposed func(epoch int64)
}

// Elector takes, renews and gives up the lease.
type Elector struct {
	cfg Config

	mu         sync.Mutex
	epoch      int64     // 0: not leading
	trustUntil time.Time // Leading is false from then on
	kick       chan struct{}
}

// New returns an Elector; Run runs it.
func New(cfg Config) *Elector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Elector{cfg: cfg, kick: make(chan struct{}, 1)}
}

// Leading reports the epoch held and whether the lease is trusted now.
func (e *Elector) Leading() (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.epoch == 0 || !e.cfg.Now().Before(e.trustUntil) {
		return 0, false
	}
	return e.epoch, true
}

// Deposed tells the elector that a fenced write found the lease taken
// (store.Fence's onDeposed): it steps down at once.
func (e *Elector) Deposed() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Step makes one attempt, as Run does every TTL/3: take or renew the
// lease, and call OnElected / OnDeposed on a change.
func (e *Elector) Step(ctx context.Context) {
	if ctx.Err() != nil {
		return // stopping: Run gives the lease up
	}
	e.mu.Lock()
	epoch := e.epoch
	if epoch != 0 && !e.cfg.Now().Before(e.trustUntil) {
		epoch = 0 // no longer trusted: step down before anything else
	}
	e.mu.Unlock()
	if epoch == 0 {
		e.stepDown()
	}
	start := e.cfg.Now()
	got, ok, err := e.cfg.Backend.AcquireLease(ctx, e.cfg.Holder, epoch, start, e.cfg.TTL)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		e.cfg.Logger.Warn("leader lease", "holder", e.cfg.Holder, "err", err)
	}
	if !ok {
		if epoch != 0 {
			e.stepDown()
		}
		return
	}
	e.mu.Lock()
	e.epoch = got
	e.trustUntil = start.Add(e.cfg.TTL * 2 / 3)
	e.mu.Unlock()
	if epoch == 0 {
		e.cfg.Logger.Info("leader lease taken", "holder", e.cfg.Holder, "epoch", got)
		if e.cfg.OnElected != nil {
			e.cfg.OnElected(got)
		}
	}
}

func (e *Elector) stepDown() {
	e.mu.Lock()
	epoch := e.epoch
	e.epoch = 0
	e.mu.Unlock()
	if epoch != 0 {
		e.cfg.Logger.Warn("leader lease lost: stepping down", "holder", e.cfg.Holder, "epoch", epoch)
		if e.cfg.OnDeposed != nil {
			e.cfg.OnDeposed(epoch)
		}
	}
}

// Run steps every TTL/3 until ctx ends, then gives the lease up.
func (e *Elector) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.TTL / 3)
	defer t.Stop()
	for {
		e.Step(ctx)
		select {
		case <-ctx.Done():
			if epoch, ok := e.Leading(); ok {
				e.cfg.Backend.ReleaseLease(context.WithoutCancel(ctx), e.cfg.Holder, epoch)
			}
			e.stepDown()
			return
		case <-e.kick:
			e.stepDown()
		case <-t.C:
		}
	}
}

// Fake is an in-memory Backend, for tests of code that uses an Elector.
type Fake struct {
	mu      sync.Mutex
	holder  string
	epoch   int64
	expires time.Time
}

// AcquireLease is store.AcquireLease on memory.
func (f *Fake) AcquireLease(_ context.Context, holder string, epoch int64, now time.Time, ttl time.Duration) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if epoch > 0 {
		if f.holder != holder || f.epoch != epoch || !now.Before(f.expires) {
			return 0, false, nil
		}
		f.expires = now.Add(ttl)
		return epoch, true, nil
	}
	if f.holder != "" && f.holder != holder && now.Before(f.expires) {
		return 0, false, nil
	}
	f.holder, f.epoch, f.expires = holder, f.epoch+1, now.Add(ttl)
	return f.epoch, true, nil
}

// ReleaseLease is store.ReleaseLease on memory.
func (f *Fake) ReleaseLease(_ context.Context, holder string, epoch int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder == holder && f.epoch == epoch {
		f.holder, f.expires = "", time.Time{}
	}
	return nil
}
