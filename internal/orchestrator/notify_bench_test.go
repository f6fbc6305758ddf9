package orchestrator

import (
	"context"
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
