package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// OutboxStore is the sender's side of the store (store.Store).
type OutboxStore interface {
	// DueOutbox returns pending rows due at now, soonest first, except
	// those of the endpoints in skip.
	DueOutbox(ctx context.Context, now time.Time, skip []string, limit int) ([]store.OutboxItem, error)
	// NextOutbox returns when the soonest pending row not due at now
	// falls due.
	NextOutbox(ctx context.Context, now time.Time) (time.Time, bool, error)
	UpdateOutbox(ctx context.Context, us ...store.OutboxUpdate) error
	AppendOutbox(ctx context.Context, items ...store.OutboxItem) error
}

// JobSource gives the sender what an event does not carry: a failed job's
// log tail, and its env values, which are cut out of anything sent.
type JobSource interface {
	// LogTail returns the last n lines of the attempt's output (rank 0).
	LogTail(jobID string, attempt, n int) []string
	// JobEnv returns the job's env values (nil when unknown).
	JobEnv(jobID string) map[string]string
}

// SenderConfig configures a Sender. Store, Registry and Deliverer are
// required.
type SenderConfig struct {
	Store     OutboxStore
	Registry  *Registry
	Planner   *Planner // routes the sender's own alerts (endpoint failing); nil: none
	Deliverer Deliverer
	Jobs      JobSource // nil: no log tails
	PublicURL string    // the dashboard's address, for links; "": no links
	Logger    *slog.Logger
	Now       func() time.Time

	RetryBase    time.Duration // first retry after this, doubling; default 2s
	RetryMax     time.Duration // the longest wait between tries; default 15m
	MaxAge       time.Duration // given up (failed) after this; default 24h
	DigestWindow time.Duration // default 1m
	DigestAfter  int           // more events than this in DigestWindow become one digest; default 5
	Workers      int           // deliveries at once, one per endpoint at most; default 8
	FailingAlert time.Duration // an endpoint failing this long raises alert.endpoint_failing; default 1h
	// Keep is how long delivered and failed rows stay in the log
	// (GET /notifications); default 30 days. Pruned hourly when the
	// store can (Pruner).
	Keep time.Duration
}

// Pruner is the optional capability of an OutboxStore to drop old rows.
type Pruner interface {
	PruneOutbox(ctx context.Context, before time.Time) (int64, error)
}

// Log tail lines sent with a failure.
const logTailLines = 10

// maxDigest bounds the events of one digest.
const maxDigest = 500

// Sender delivers the outbox: at least once, one message in flight per
// endpoint, retrying with exponential backoff until MaxAge, then marking
// the row failed. More than DigestAfter events for one endpoint within
// DigestWindow go out as one digest. Every outcome is written to the
// store; rows still pending when the process dies are sent after the next
// start. It runs on its own goroutine (Run) and never touches the
// orchestrator's lock: a slow endpoint holds up only its own rows.
type Sender struct {
	cfg  SenderConfig
	log  *slog.Logger
	kick chan struct{}
	done chan struct{}

	mu       sync.Mutex
	inflight map[string]bool        // endpoints with a delivery under way
	recent   map[string][]time.Time // deliveries tried per endpoint, within the window
	failing  map[string]time.Time   // endpoints failing since
	alerted  map[string]bool        // endpoints whose failing alert was raised
	pruned   time.Time              // when old rows were last pruned (Run's goroutine only)
}

// NewSender returns a sender; run it with Run.
func NewSender(cfg SenderConfig) *Sender {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 2 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 15 * time.Minute
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	if cfg.DigestWindow <= 0 {
		cfg.DigestWindow = time.Minute
	}
	if cfg.DigestAfter <= 0 {
		cfg.DigestAfter = 5
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.FailingAlert <= 0 {
		cfg.FailingAlert = time.Hour
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 30 * 24 * time.Hour
	}
	return &Sender{cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1), done: make(chan struct{}, 1),
		inflight: map[string]bool{}, recent: map[string][]time.Time{}, failing: map[string]time.Time{}, alerted: map[string]bool{}}
}

// Kick wakes the sender: rows were committed. It never blocks.
func (s *Sender) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the deliveries under way.
func (s *Sender) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.kick:
		case <-s.done:
		case <-timer.C:
		}
		// The store has one connection, shared with the orchestrator's
		// commits: passes are spaced so that a stream of commits does not
		// become a stream of outbox reads.
		if gap := time.Since(last); gap < minPassGap {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(minPassGap - gap):
			}
		}
		last = time.Now()
		s.prune(ctx)
		wait := s.pass(ctx, &wg)
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		timer.Reset(wait)
	}
}

// prune drops rows older than Keep, at most once an hour.
func (s *Sender) prune(ctx context.Context) {
	p, ok := s.cfg.Store.(Pruner)
	now := s.cfg.Now()
	if !ok || now.Sub(s.pruned) < time.Hour {
		return
	}
	s.pruned = now
	if n, err := p.PruneOutbox(ctx, now.Add(-s.cfg.Keep)); err != nil {
		s.log.Error("notify: pruning the outbox", "err", err)
	} else if n > 0 {
		s.log.Info("notify: old notifications pruned", "rows", n, "older_than", s.cfg.Keep)
	}
}

// pendingLimit bounds the rows one pass reads.
const pendingLimit = 1000

// minPassGap is the least time between two passes.
const minPassGap = 50 * time.Millisecond

// idleWait is the longest a pass sleeps (the store may have rows added by
// another writer, e.g. alerts).
const idleWait = 5 * time.Second

// pass starts the deliveries that are due and returns how long to sleep.
func (s *Sender) pass(ctx context.Context, wg *sync.WaitGroup) time.Duration {
	now := s.cfg.Now()
	s.mu.Lock()
	var skip []string
	for ep := range s.inflight {
		skip = append(skip, ep)
	}
	s.mu.Unlock()
	// Only due rows of idle endpoints are read: a slow endpoint's backlog
	// is not read again and again while its delivery is under way.
	rows, err := s.cfg.Store.DueOutbox(ctx, now, skip, pendingLimit)
	if err != nil {
		s.log.Error("notify: reading the outbox", "err", err)
		return idleWait
	}
	wait := idleWait
	if next, ok, err := s.cfg.Store.NextOutbox(ctx, now); err == nil && ok {
		wait = min(wait, next.Sub(now))
	}
	byEP := map[string][]store.OutboxItem{}
	var order []string
	for _, r := range rows {
		if _, ok := byEP[r.EndpointID]; !ok {
			order = append(order, r.EndpointID)
		}
		byEP[r.EndpointID] = append(byEP[r.EndpointID], r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	busy := 0
	for _, v := range s.inflight {
		if v {
			busy++
		}
	}
	var gone []store.OutboxUpdate
	for _, ep := range order {
		if s.inflight[ep] {
			continue
		}
		t, ok := s.cfg.Registry.target(ep)
		if !ok {
			for _, r := range byEP[ep] {
				gone = append(gone, store.OutboxUpdate{Seq: r.Seq, State: store.OutboxFailed, NextAt: r.NextAt, Attempts: r.Attempts,
					Digest: r.Digest, LastError: "the endpoint was removed, or its secrets cannot be opened"})
			}
			continue
		}
		var due []store.OutboxItem
		for _, r := range byEP[ep] {
			if r.NextAt.After(now) {
				wait = min(wait, r.NextAt.Sub(now))
				continue
			}
			due = append(due, r)
		}
		if len(due) == 0 {
			continue
		}
		batch, retry := s.choose(ep, due, now)
		if len(batch) == 0 {
			wait = min(wait, retry)
			continue
		}
		if busy >= s.cfg.Workers {
			wait = min(wait, 100*time.Millisecond)
			break
		}
		if len(batch) > 1 && batch[0].Digest == 0 {
			// Fix the digest's members before the first try, so a retry
			// (or a restart) sends the same digest under the same id.
			ups := make([]store.OutboxUpdate, len(batch))
			for i, r := range batch {
				batch[i].Digest = batch[0].Seq
				ups[i] = store.OutboxUpdate{Seq: r.Seq, State: r.State, NextAt: r.NextAt, Attempts: r.Attempts, Digest: batch[0].Seq, LastError: r.LastError}
			}
			if err := s.cfg.Store.UpdateOutbox(ctx, ups...); err != nil {
				s.log.Error("notify: recording a digest", "err", err)
				continue
			}
		}
		s.inflight[ep] = true
		s.recent[ep] = append(s.recent[ep], now)
		busy++
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.deliver(ctx, t, batch)
			s.mu.Lock()
			delete(s.inflight, ep)
			s.mu.Unlock()
			select {
			case s.done <- struct{}{}:
			default:
			}
		}()
	}
	if len(gone) > 0 {
		if err := s.cfg.Store.UpdateOutbox(ctx, gone...); err != nil {
			s.log.Error("notify: dropping rows of a removed endpoint", "err", err)
		}
	}
	return max(wait, 10*time.Millisecond)
}

// choose picks what to send to an endpoint now out of its due rows (in
// seq order): a digest already formed; else one row while the endpoint
// is under DigestAfter messages in the window; else all of them as one
// digest when the window has room for one more message. Nothing: retry
// says when the window frees. Lock held.
func (s *Sender) choose(ep string, due []store.OutboxItem, now time.Time) (batch []store.OutboxItem, retry time.Duration) {
	slices.SortFunc(due, func(a, b store.OutboxItem) int { return int(a.Seq - b.Seq) })
	for _, r := range due {
		if r.Digest != 0 {
			for _, o := range due {
				if o.Digest == r.Digest {
					batch = append(batch, o)
				}
			}
			return batch, 0
		}
	}
	// The window: deliveries tried within it.
	rec := s.recent[ep][:0]
	for _, t := range s.recent[ep] {
		if now.Sub(t) < s.cfg.DigestWindow {
			rec = append(rec, t)
		}
	}
	s.recent[ep] = rec
	n := len(rec)
	switch {
	case n+len(due) <= s.cfg.DigestAfter:
		return due[:1], 0
	case n < s.cfg.DigestAfter:
		return due[:min(len(due), maxDigest)], 0
	}
	return nil, rec[0].Add(s.cfg.DigestWindow).Sub(now)
}

// deliver sends rows as one message and records the outcome.
func (s *Sender) deliver(ctx context.Context, t Target, rows []store.OutboxItem) {
	m := Message{}
	for _, r := range rows {
		var ev Event
		if err := json.Unmarshal([]byte(r.Data), &ev); err != nil {
			ev = Event{Kind: Kind(r.Kind), At: r.CreatedAt, Text: "an unreadable notification"}
		}
		s.enrich(&ev)
		m.Items = append(m.Items, Item{EventID: EventID(r.Seq), Event: ev})
	}
	m.EventID = m.Items[0].EventID
	if len(rows) > 1 {
		m.EventID = DigestID(rows[0].Digest)
	}
	err := s.cfg.Deliverer.Deliver(ctx, t, m)
	now := s.cfg.Now()
	if ctx.Err() != nil {
		return // shutting down: the rows stay pending, sent after the next start
	}
	ups := make([]store.OutboxUpdate, len(rows))
	for i, r := range rows {
		u := store.OutboxUpdate{Seq: r.Seq, State: store.OutboxDelivered, NextAt: r.NextAt, Attempts: r.Attempts + 1, Digest: r.Digest, DeliveredAt: now}
		if err != nil {
			u.State, u.DeliveredAt, u.LastError = store.OutboxPending, time.Time{}, truncate(err.Error(), 500)
			u.NextAt = now.Add(s.backoff(u.Attempts))
			var p Permanent
			if errors.As(err, &p) || now.Sub(r.CreatedAt) >= s.cfg.MaxAge {
				u.State = store.OutboxFailed
			}
		}
		ups[i] = u
	}
	if werr := s.cfg.Store.UpdateOutbox(context.WithoutCancel(ctx), ups...); werr != nil {
		s.log.Error("notify: recording a delivery", "err", werr, "endpoint", t.ID)
	}
	if err != nil {
		s.log.Warn("notify: delivery failed", "endpoint", t.ID, "kind", t.Kind, "event_id", m.EventID, "err", err, "cause", Cause(err), "attempt", rows[0].Attempts+1)
	} else {
		s.log.Debug("notify: delivered", "endpoint", t.ID, "event_id", m.EventID, "events", len(rows))
	}
	s.noteOutcome(ctx, t, err, now)
}

// backoff is the wait after the n-th failed try.
func (s *Sender) backoff(n int) time.Duration {
	d := s.cfg.RetryBase
	for i := 1; i < n && d < s.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.RetryMax)
}

// noteOutcome tracks failing endpoints and raises alert.endpoint_failing
// (to the cluster's other endpoints) once one has failed for FailingAlert.
func (s *Sender) noteOutcome(ctx context.Context, t Target, err error, now time.Time) {
	s.mu.Lock()
	if err == nil {
		delete(s.failing, t.ID)
		delete(s.alerted, t.ID)
		s.mu.Unlock()
		return
	}
	since, ok := s.failing[t.ID]
	if !ok {
		s.failing[t.ID], since = now, now
	}
	raise := now.Sub(since) >= s.cfg.FailingAlert && !s.alerted[t.ID]
	if raise {
		s.alerted[t.ID] = true
	}
	s.mu.Unlock()
	if !raise || s.cfg.Planner == nil {
		return
	}
	pub, _ := s.cfg.Registry.Get(t.ID)
	ev := Event{Kind: AlertEndpointFailing, At: now, Alert: &Alert{Message: fmt.Sprintf("notification endpoint %s (%s of %s %s) has failed since %s: %s",
		t.ID, t.Kind, pub.Scope, pub.Owner, since.UTC().Format(time.RFC3339), truncate(err.Error(), 200))}}
	var items []store.OutboxItem
	for _, it := range s.cfg.Planner.Plan([]Event{ev}) {
		if it.EndpointID != t.ID {
			items = append(items, it)
		}
	}
	if err := s.cfg.Store.AppendOutbox(context.WithoutCancel(ctx), items...); err != nil {
		s.log.Error("notify: raising an alert", "err", err)
	}
}

// enrich adds what is read at send time: the dashboard link and a
// failure's log tail; every env value of the job is cut out of the text.
func (s *Sender) enrich(ev *Event) {
	if ev.Job != nil {
		j := ev.Job
		j.URL = JobURL(s.cfg.PublicURL, j.ID)
		if s.cfg.Jobs != nil {
			if ev.Kind == JobFailed || ev.Kind == JobTimeLimit {
				j.LogTail = s.cfg.Jobs.LogTail(j.ID, j.Attempt, logTailLines)
			}
			env := secretsOf(s.cfg.Jobs.JobEnv(j.ID), j.Attempt)
			j.Message = scrub(j.Message, env)
			j.Name = scrub(j.Name, env)
			for i, l := range j.LogTail {
				j.LogTail[i] = scrub(l, env)
			}
		}
	}
	if ev.Array != nil {
		ev.Array.URL = JobURL(s.cfg.PublicURL, ev.Array.ID)
	}
}

// minScrub is the shortest env value cut out of messages: shorter ones
// ("1", "on") would garble the text and give nothing away.
const minScrub = 4

// Redacted replaces env values in messages.
const Redacted = "[redacted]"

// maxNotebookAttempts bounds how many attempts' notebook secrets are
// cut out of a message: the latest ones, the attempt's own first.
const maxNotebookAttempts = 100

// secretsOf is what is cut out of a job's messages: every env value, and
// for a notebook job the per-attempt secret each attempt's task was given
// instead of the job's own (api.NotebookSecret), which the notebook
// server prints in its log (a ?token= link). env is not changed.
func secretsOf(env map[string]string, attempt int) map[string]string {
	jobSecret := env[api.NotebookTokenVar]
	if jobSecret == "" {
		return env
	}
	out := make(map[string]string, len(env)+min(attempt+1, maxNotebookAttempts))
	for k, v := range env {
		out[k] = v
	}
	for a := attempt; a >= 0 && a > attempt-maxNotebookAttempts; a-- {
		out[fmt.Sprintf("%s#%d", api.NotebookTokenVar, a)] = api.NotebookSecret(jobSecret, a)
	}
	return out
}

// scrub replaces every env value (of minScrub or more bytes) in s.
func scrub(s string, env map[string]string) string {
	for _, v := range env {
		if len(v) >= minScrub && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return s
}

// EventID is the event_id of outbox row seq.
func EventID(seq int64) string { return fmt.Sprintf("n%d", seq) }

// DigestID is the event_id of the digest whose first row is seq.
func DigestID(seq int64) string { return fmt.Sprintf("d%d", seq) }

// Test sends a test message to an endpoint now, outside the outbox, and
// returns the delivery's error.
func (s *Sender) Test(ctx context.Context, id, by string) error {
	t, ok := s.cfg.Registry.target(id)
	if !ok {
		return fmt.Errorf("no notification endpoint %q", id)
	}
	var r [6]byte
	rand.Read(r[:])
	ev := Event{Kind: Test, At: s.cfg.Now().UTC(), Text: fmt.Sprintf("Corral test notification from %s: this endpoint works", by)}
	return s.cfg.Deliverer.Deliver(ctx, t, Message{EventID: "t" + hex.EncodeToString(r[:]), Items: []Item{{EventID: "t" + hex.EncodeToString(r[:]), Event: ev}}})
}

// SetPlanner sets the planner of the sender's own alerts; call it before
// Run.
func (s *Sender) SetPlanner(p *Planner) { s.cfg.Planner = p }

// Raise writes an alert raised outside the orchestrator (the data disk)
// to the outbox, routed to the cluster's endpoints, and wakes the sender.
func (s *Sender) Raise(ctx context.Context, ev Event) error {
	if s.cfg.Planner == nil {
		return nil
	}
	if err := s.cfg.Store.AppendOutbox(ctx, s.cfg.Planner.Plan([]Event{ev})...); err != nil {
		return err
	}
	s.Kick()
	return nil
}
