package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// clock is a fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeJobs is a JobSource.
type fakeJobs struct{}

func (fakeJobs) LogTail(id string, attempt, n int) []string {
	return []string{"loading", "token is hf_abcdef123", "Traceback: boom"}
}
func (fakeJobs) JobEnv(id string) map[string]string {
	return map[string]string{"HF_TOKEN": "hf_abcdef123", "SHORT": "1"}
}

// senderEnv is a sender over the fakes with a fake clock; step runs one
// pass and waits for its deliveries.
type senderEnv struct {
	t   *testing.T
	reg *Registry
	st  *MemStore
	rec *Recorder
	clk *clock
	s   *Sender
}

func newSenderEnv(t *testing.T) *senderEnv {
	reg, st := newTestRegistry(t)
	e := &senderEnv{t: t, reg: reg, st: st, rec: &Recorder{}, clk: &clock{t: time.Unix(10000, 0).UTC()}}
	e.s = NewSender(SenderConfig{Store: st, Registry: reg, Deliverer: e.rec, Jobs: fakeJobs{}, Now: e.clk.now, PublicURL: "https://corral.example",
		Logger: slog.New(slog.DiscardHandler)})
	e.s.SetPlanner(NewPlanner(reg, nil))
	return e
}

func (e *senderEnv) step() {
	var wg sync.WaitGroup
	e.s.pass(context.Background(), &wg)
	wg.Wait()
}

func (e *senderEnv) enqueue(ep string, n int, kind Kind) {
	e.t.Helper()
	var items []store.OutboxItem
	for i := range n {
		ev := Event{Kind: kind, At: e.clk.now(), Job: &JobInfo{ID: fmt.Sprintf("j%d", i), User: "ana", Project: "nlp", State: "failed", Message: "exit code 1 hf_abcdef123"}}
		items = append(items, store.OutboxItem{EndpointID: ep, Kind: string(kind), CreatedAt: e.clk.now(), Data: mustJSON(ev)})
	}
	if err := e.st.AppendOutbox(context.Background(), items...); err != nil {
		e.t.Fatal(err)
	}
}

func (e *senderEnv) rows(state string) []store.OutboxItem {
	rows, _ := e.st.Outbox(context.Background(), store.OutboxFilter{State: state, Limit: 10000})
	return rows
}

// TestSenderRetriesThenDelivers: a failing endpoint's row stays pending,
// retried after a doubling backoff, and is delivered once the endpoint
// answers; the message carries the dashboard link and the log tail with
// the env value cut out.
func TestSenderRetriesThenDelivers(t *testing.T) {
	e := newSenderEnv(t)
	ep := addEP(t, e.reg, api.EndpointRequest{Scope: api.ScopeUser, User: "ana"})
	fail := true
	e.rec.Fail = func(Target, Message) error {
		if fail {
			return errors.New("503")
		}
		return nil
	}
	e.enqueue(ep, 1, JobFailed)
	var waits []time.Duration
	for range 3 {
		e.step()
		r := e.rows(store.OutboxPending)
		if len(r) != 1 {
			t.Fatalf("rows pending: %+v", r)
		}
		waits = append(waits, r[0].NextAt.Sub(e.clk.now()))
		e.step() // not due yet: nothing is tried
		if got := e.rows(store.OutboxPending)[0].Attempts; got != len(waits) {
			t.Fatalf("tried %d times before it was due again", got)
		}
		e.clk.add(waits[len(waits)-1])
	}
	if waits[0] != 2*time.Second || waits[1] != 4*time.Second || waits[2] != 8*time.Second {
		t.Errorf("backoff %v, want 2s 4s 8s", waits)
	}
	fail = false
	e.step()
	d := e.rows(store.OutboxDelivered)
	if len(d) != 1 || d[0].Attempts != 4 {
		t.Fatalf("delivered rows: %+v", d)
	}
	sent := e.rec.Deliveries()
	if len(sent) != 1 {
		t.Fatalf("deliveries: %d", len(sent))
	}
	txt := sent[0].Message.Text()
	for _, w := range []string{"https://corral.example/#/jobs/j0", "Traceback: boom", "token is [redacted]", "exit code 1 [redacted]"} {
		if !strings.Contains(txt, w) {
			t.Errorf("the message lacks %q:\n%s", w, txt)
		}
	}
	if strings.Contains(txt, "hf_abcdef123") {
		t.Errorf("the message carries the env value:\n%s", txt)
	}
}

// TestSenderGivesUp: a row still failing after MaxAge is marked failed;
// a permanent error fails at once.
func TestSenderGivesUp(t *testing.T) {
	e := newSenderEnv(t)
	ep := addEP(t, e.reg, api.EndpointRequest{Scope: api.ScopeUser, User: "ana"})
	e.rec.Fail = func(Target, Message) error { return errors.New("connection refused") }
	e.enqueue(ep, 1, JobFailed)
	for e.clk.now().Before(time.Unix(10000, 0).Add(25 * time.Hour)) {
		e.step()
		if len(e.rows(store.OutboxFailed)) == 1 {
			break
		}
		e.clk.add(15 * time.Minute)
	}
	f := e.rows(store.OutboxFailed)
	if len(f) != 1 || f[0].CreatedAt.Add(24*time.Hour).After(e.clk.now()) || f[0].LastError != "connection refused" {
		t.Fatalf("failed rows at %s: %+v", e.clk.now(), f)
	}
	e.rec.Fail = func(Target, Message) error { return Permanent{errors.New("404")} }
	e.enqueue(ep, 1, JobFailed)
	e.step()
	if f := e.rows(store.OutboxFailed); len(f) != 2 {
		t.Fatalf("a permanent error was retried: %+v", e.rows(""))
	}
}

// TestSenderDigests: more than DigestAfter events for one endpoint in the
// window go out as one digest; another endpoint is not held up; after the
// window, single messages again.
func TestSenderDigests(t *testing.T) {
	e := newSenderEnv(t)
	a := addEP(t, e.reg, api.EndpointRequest{Scope: api.ScopeUser, User: "ana"})
	b := addEP(t, e.reg, api.EndpointRequest{Scope: api.ScopeUser, User: "bob"})
	count := func(ep string) (msgs, events int) {
		for _, d := range e.rec.Deliveries() {
			if d.Target.ID == ep {
				msgs++
				events += len(d.Message.Items)
			}
		}
		return
	}
	// Three singles fit the window.
	for range 3 {
		e.enqueue(a, 1, JobFailed)
		e.step()
	}
	if m, n := count(a); m != 3 || n != 3 {
		t.Fatalf("singles: %d messages, %d events", m, n)
	}
	// 100 more at once: one digest.
	e.enqueue(a, 100, JobCompleted)
	e.enqueue(b, 1, JobFailed)
	e.step()
	if m, n := count(a); m != 4 || n != 103 {
		t.Fatalf("after the burst: %d messages, %d events", m, n)
	}
	if m, _ := count(b); m != 1 {
		t.Errorf("the other endpoint was held up: %d messages", m)
	}
	last := e.rec.Deliveries()
	var dg Message
	for _, d := range last {
		if d.Message.Digest() {
			dg = d.Message
		}
	}
	if !strings.HasPrefix(dg.EventID, "d") || dg.Kind() != Digest || !strings.Contains(dg.Subject(), "100 completed") {
		t.Errorf("digest: id %q, subject %q", dg.EventID, dg.Subject())
	}
	for _, r := range e.rows(store.OutboxDelivered) {
		if r.EndpointID == a && r.Kind == string(JobCompleted) && DigestID(r.Digest) != dg.EventID {
			t.Fatalf("row %d is not recorded in the digest: %+v", r.Seq, r)
		}
	}
	// One more message fits (4 so far); then the window is full: the
	// rest waits for it and goes as one digest.
	e.enqueue(a, 1, JobFailed)
	e.step()
	e.enqueue(a, 2, JobFailed)
	e.step()
	if m, _ := count(a); m != 5 {
		t.Fatalf("with the window full: %d messages, want 5", m)
	}
	// After the window, 2 waiting events are few enough to go singly.
	e.clk.add(time.Minute)
	e.step()
	e.step()
	if m, n := count(a); m != 7 || n != 106 {
		t.Fatalf("after the window: %d messages, %d events", m, n)
	}
}

// TestSenderRemovedEndpoint: rows of an endpoint that is gone fail.
func TestSenderRemovedEndpoint(t *testing.T) {
	e := newSenderEnv(t)
	e.enqueue("ne_gone", 2, JobFailed)
	e.step()
	if f := e.rows(store.OutboxFailed); len(f) != 2 || !strings.HasPrefix(f[0].LastError, "the endpoint was removed") {
		t.Fatalf("%+v", e.rows(""))
	}
}

// TestSenderEndpointFailingAlert: an endpoint failing for an hour raises
// alert.endpoint_failing to the cluster's other endpoints, once.
func TestSenderEndpointFailingAlert(t *testing.T) {
	e := newSenderEnv(t)
	a := addEP(t, e.reg, api.EndpointRequest{Scope: api.ScopeUser, User: "ana"})
	ops := addEP(t, e.reg, api.EndpointRequest{Scope: api.ScopeCluster})
	e.rec.Fail = func(t Target, m Message) error {
		if t.ID == a {
			return errors.New("503")
		}
		return nil
	}
	e.enqueue(a, 1, JobFailed)
	for range 12 {
		e.step()
		e.clk.add(10 * time.Minute)
	}
	alerts := 0
	for _, d := range e.rec.Deliveries() {
		for _, it := range d.Message.Items {
			if it.Kind == AlertEndpointFailing {
				alerts++
				if d.Target.ID != ops || !strings.Contains(it.Alert.Message, a) {
					t.Errorf("alert %+v to %s", it.Alert, d.Target.ID)
				}
			}
		}
	}
	if alerts != 1 {
		t.Errorf("%d endpoint_failing alerts, want 1", alerts)
	}
}

func mustJSON(v any) string {
	b, err := jsonMarshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var jsonMarshal = func(v any) ([]byte, error) { return json.Marshal(v) }

// notebookJobs is a JobSource of a notebook job whose server printed its
// attempt's secret in its log (as Jupyter prints its ?token= link).
type notebookJobs struct{ jobSecret string }

func (n notebookJobs) LogTail(id string, attempt, n2 int) []string {
	return []string{
		"[I ServerApp] http://127.0.0.1:20123/lab?token=" + api.NotebookSecret(n.jobSecret, attempt),
		"previous attempt's token " + api.NotebookSecret(n.jobSecret, attempt-1),
		"Traceback: boom",
	}
}
func (n notebookJobs) JobEnv(id string) map[string]string {
	return map[string]string{api.NotebookTokenVar: n.jobSecret}
}

// TestSenderCutsNotebookSecrets: a notebook job's per-attempt secret (not
// in its env, which holds the job's own) is cut out of a failure's log
// tail and message, as env values are.
func TestSenderCutsNotebookSecrets(t *testing.T) {
	const jobSecret = "nbsecret-0123456789abcdef"
	for _, attempt := range []int{1, 3} {
		e := newSenderEnv(t)
		e.s.cfg.Jobs = notebookJobs{jobSecret}
		ev := Event{Kind: JobFailed, At: e.clk.now(), Job: &JobInfo{ID: "j1", User: "ana", State: "failed", Attempt: attempt,
			Message: "exit 1 after " + api.NotebookSecret(jobSecret, attempt)}}
		e.s.enrich(&ev)
		b, _ := json.Marshal(ev)
		for a := range attempt + 1 {
			if sec := api.NotebookSecret(jobSecret, a); strings.Contains(string(b), sec) {
				t.Errorf("attempt %d: the secret of attempt %d is in the notification: %s", attempt, a, b)
			}
		}
		if !strings.Contains(string(b), "lab?token=[redacted]") || !strings.Contains(string(b), "Traceback: boom") {
			t.Errorf("attempt %d: the log tail is not kept around the cut: %s", attempt, b)
		}
	}
}
