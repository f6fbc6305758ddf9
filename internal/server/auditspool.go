package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// While the store cannot write (its disk is full, say), the calls it
// refuses are still audited: their entries wait in memory, oldest first,
// and are written as soon as it can again. Meanwhile, a call's entry is
// not tried against the store at all once others are waiting (a refusal
// stays as quick as the store's own refusal), and the server logs one
// warning when entries start waiting, not one error per call.

// maxSpooled bounds the audit entries kept in memory while the store
// cannot write; past it, new ones are counted and dropped (and the count
// logged once they are written).
const maxSpooled = 10000

// Pauses between tries to write the waiting entries.
const (
	spoolRetryFirst = 200 * time.Millisecond
	spoolRetryMax   = 5 * time.Second
)

// auditSpool holds the audit entries the store could not write yet.
type auditSpool struct {
	write func(ctx context.Context, entries ...api.AuditEntry) error
	log   *slog.Logger
	first time.Duration // first pause between tries; 0: spoolRetryFirst

	mu       sync.Mutex
	waiting  []api.AuditEntry // oldest first
	dropped  int
	flushing bool // a goroutine writes waiting until it is empty
	idle     chan struct{}
}

// record writes e, or keeps it for later when the store cannot write or
// older entries still wait. It returns at once when entries wait.
func (sp *auditSpool) record(ctx context.Context, e api.AuditEntry) {
	sp.mu.Lock()
	if len(sp.waiting) == 0 && !sp.flushing {
		sp.mu.Unlock()
		err := sp.write(ctx, e)
		if err == nil {
			return
		}
		sp.mu.Lock()
		if len(sp.waiting) == 0 && !sp.flushing {
			sp.log.Warn("audit: the store cannot write; the audit trail's entries are kept in memory and written once it can",
				"err", err, "kept_at_most", maxSpooled)
		}
	}
	defer sp.mu.Unlock()
	if len(sp.waiting) >= maxSpooled {
		sp.dropped++
		return
	}
	sp.waiting = append(sp.waiting, e)
	if !sp.flushing {
		sp.flushing = true
		sp.idle = make(chan struct{})
		go sp.flush()
	}
}

// flush writes the waiting entries, in order, pausing longer after each
// failure, until none is left.
func (sp *auditSpool) flush() {
	pause := sp.first
	if pause <= 0 {
		pause = spoolRetryFirst
	}
	began, written := time.Now(), 0
	for {
		time.Sleep(pause)
		sp.mu.Lock()
		batch := sp.waiting[:min(len(sp.waiting), 500):min(len(sp.waiting), 500)]
		sp.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := sp.write(ctx, batch...)
		cancel()
		if err != nil {
			pause = min(2*pause, spoolRetryMax)
			continue
		}
		written += len(batch)
		pause = time.Millisecond
		sp.mu.Lock()
		sp.waiting = sp.waiting[len(batch):]
		if len(sp.waiting) == 0 {
			sp.log.Info("audit: the entries kept while the store could not write are written",
				"entries", written, "dropped", sp.dropped, "waited", time.Since(began).Round(time.Millisecond))
			sp.waiting, sp.dropped, sp.flushing = nil, 0, false
			close(sp.idle)
			sp.mu.Unlock()
			return
		}
		sp.mu.Unlock()
	}
}

// drained returns a channel closed once no entry waits.
func (sp *auditSpool) drained() <-chan struct{} {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.flushing {
		c := make(chan struct{})
		close(c)
		return c
	}
	return sp.idle
}
