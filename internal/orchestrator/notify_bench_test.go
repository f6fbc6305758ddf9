package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
)

// BenchmarkCancelNotify is what notifications add to a change's commit:
// canceling a queued job (one transition, one commit) with no notifier
// (the baseline), with a notifier but no endpoint that wants the event
// (routing only), and with one endpoint that does (an outbox row written
// in the same transaction).
func BenchmarkCancelNotify(b *testing.B) {
	for _, mode := range []string{"off", "no-endpoint", "one-endpoint"} {
		b.Run(mode, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			st, err := store.Open(ctx, filepath.Join(b.TempDir(), "corral.db"))
			if err != nil {
				b.Fatal(err)
			}
			cfg := Config{Store: st, Executor: nopExec{}, Nodes: []Node{simNode("n1", 8)}, DataDir: b.TempDir(),
				Tick: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if mode != "off" {
				seal, _ := notify.NewSealer(make([]byte, 32))
				reg, err := notify.NewRegistry(ctx, &notify.MemStore{}, seal, nil)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "one-endpoint" {
					if _, err := reg.Add(ctx, api.EndpointRequest{Kind: api.EndpointSlack, URL: "https://hooks.example.com/x", Scope: api.ScopeUser, User: "ana"}, "ana"); err != nil {
						b.Fatal(err)
					}
				}
				cfg.Notify = notify.NewPlanner(reg, nil)
			}
			o, err := New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { o.Run(ctx); close(done) }()
			defer func() { cancel(); <-done; st.Close() }()
			benchCancels(ctx, b, o)
			b.StopTimer()
			if mode == "one-endpoint" {
				rows, _ := st.Outbox(ctx, store.OutboxFilter{Limit: b.N + 10})
				if len(rows) != b.N {
					b.Fatalf("%d outbox rows for %d cancels", len(rows), b.N)
				}
			}
		})
	}
}

// slowDeliverer answers after a delay, as a slow endpoint does.
type slowDeliverer struct{ d time.Duration }

func (s slowDeliverer) Deliver(ctx context.Context, _ notify.Target, _ notify.Message) error {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
	}
	return errors.New("503")
}

// BenchmarkCancelSlowEndpoint: the same commits as BenchmarkCancelNotify
// with the sender running against an endpoint that takes 2 s to fail
// each delivery, beside a baseline without notifications in the same
// run: a slow endpoint must not slow the orchestrator's commits.
func BenchmarkCancelSlowEndpoint(b *testing.B) {
	for _, mode := range []string{"off", "slow-endpoint"} {
		b.Run(mode, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			st, err := store.Open(ctx, filepath.Join(b.TempDir(), "corral.db"))
			if err != nil {
				b.Fatal(err)
			}
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg := Config{Store: st, Executor: nopExec{}, Nodes: []Node{simNode("n1", 8)}, DataDir: b.TempDir(), Tick: time.Hour, Logger: logger}
			sendDone := make(chan struct{})
			close(sendDone)
			if mode != "off" {
				seal, _ := notify.NewSealer(make([]byte, 32))
				reg, err := notify.NewRegistry(ctx, &notify.MemStore{}, seal, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := reg.Add(ctx, api.EndpointRequest{Kind: api.EndpointSlack, URL: "https://hooks.example.com/x", Scope: api.ScopeUser, User: "ana"}, "ana"); err != nil {
					b.Fatal(err)
				}
				snd := notify.NewSender(notify.SenderConfig{Store: st, Registry: reg, Deliverer: slowDeliverer{2 * time.Second}, Logger: logger,
					RetryBase: time.Millisecond})
				cfg.Notify = notify.NewPlanner(reg, snd.Kick)
				sendDone = make(chan struct{})
				go func() { snd.Run(ctx); close(sendDone) }()
			}
			o, err := New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { o.Run(ctx); close(done) }()
			defer func() { cancel(); <-done; <-sendDone; st.Close() }()
			benchCancels(ctx, b, o)
		})
	}
}

// benchCancels queues b.N jobs with scheduling off, then times canceling
// them one by one: one commit each, with its notifications.
func benchCancels(ctx context.Context, b *testing.B, o *Orchestrator) {
	if _, err := o.SetScheduling(ctx, false); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, b.N)
	for i := range ids {
		j, _, err := o.Submit(ctx, api.SubmitRequest{User: "ana", Command: fmt.Sprint("true ", i), GPUCount: new(1), Notify: "all"}, "")
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = j.ID
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, id := range ids {
		if _, _, err := o.Cancel(ctx, id, 0); err != nil {
			b.Fatal(err)
		}
	}
}
