// Package storetest is the conformance suite every store implementation
// passes (SQLite, the embedded default, and PostgreSQL), and the helper
// that gives tests a fresh PostgreSQL database.
//
// A test that needs PostgreSQL calls Postgres(t): it reads the connection
// string of a server the test may use from CORRAL_TEST_POSTGRES
// (scripts/pg-test.sh starts a throwaway one and prints it) and skips the
// test, naming that variable, when it is unset.
package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// EnvPostgres names the variable holding the test server's connection
// string.
const EnvPostgres = "CORRAL_TEST_POSTGRES"

// Postgres returns the connection string of a new, empty PostgreSQL
// schema of its own on the server CORRAL_TEST_POSTGRES names (its
// search_path), dropped when the test ends; it skips the test when the
// variable is unset.
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvPostgres)
	if base == "" {
		t.Skipf("%s is not set: no PostgreSQL to test against (scripts/pg-test.sh starts one)", EnvPostgres)
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("%s: %v", EnvPostgres, err)
	}
	defer db.Close()
	name := fmt.Sprintf("t_%d_%d", time.Now().UnixNano(), os.Getpid())
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("%s: create schema: %v", EnvPostgres, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		db.ExecContext(context.Background(), "DROP SCHEMA "+name+" CASCADE")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvPostgres, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// Opener opens the same database each time it is called (so that a test
// can close a store and open it again); the suite closes what it opens.
type Opener func(ctx context.Context) (*store.Store, error)

// Run runs the suite. newDB makes a fresh, empty database for one test
// and returns its Opener.
func Run(t *testing.T, newDB func(t *testing.T) Opener) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"CommitAndLoad", testCommitAndLoad},
		{"GroupCommitIsolatesFailures", testGroupCommitIsolatesFailures},
		{"Audit", testAudit},
		{"Tokens", testTokens},
		{"Outbox", testOutbox},
		{"EndpointsAndDefaults", testEndpointsAndDefaults},
		{"History", testHistory},
		{"Arrays", testArrays},
		{"Lease", testLease},
		{"Numbers", testNumbers}, // numbers.go
		{"Runs", testRuns},       // runs.go
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newDB(t)) })
	}
}

func open(t *testing.T, o Opener) *store.Store {
	t.Helper()
	s, err := o(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var at = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func testCommitAndLoad(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	j := api.Job{ID: "j1", User: "ana", Project: "p", Command: "true", State: api.StateQueued, Priority: api.PriorityHigh, SubmittedAt: at}
	b := &store.Batch{
		Jobs:        []api.Job{j},
		Events:      []store.JobEvent{{JobID: "j1", Event: api.Event{At: at, To: api.StateQueued, Reason: api.ReasonSubmitted}}},
		Holds:       []api.Hold{{JobID: "nb", HeldAt: at, Allocation: []api.Allocation{{NodeID: "n", GPUID: 3}}}, {JobID: "gone", HeldAt: at}},
		Idempotency: map[string]string{"k1": "j1"},
		Settings:    map[string]string{"policy": "fcfs"},
		Nodes:       map[string]string{"n1": `{"id":"n1"}`},
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	j.State = api.StateRunning
	if err := s.Commit(ctx, &store.Batch{
		Jobs:        []api.Job{j},
		Events:      []store.JobEvent{{JobID: "j1", Event: api.Event{At: at, From: api.StateQueued, To: api.StateRunning, Reason: "started"}}},
		DeleteHolds: []string{"gone"},
		Settings:    map[string]string{"policy": "fairshare"},
		Nodes:       map[string]string{"n1": `{"id":"n1","v":2}`},
	}); err != nil {
		t.Fatal(err)
	}
	// A batch that breaks a constraint (the idempotency key exists) changes nothing.
	bad := &store.Batch{Jobs: []api.Job{{ID: "j2", State: api.StateQueued, Priority: api.PriorityNormal}}, Idempotency: map[string]string{"k1": "j2"}}
	if err := s.Commit(ctx, bad); err == nil {
		t.Fatal("duplicate idempotency key committed")
	}
	// Many rows in one batch: more than one multi-row INSERT.
	var many store.Batch
	for i := range 150 {
		id := fmt.Sprintf("m%03d", i)
		many.Jobs = append(many.Jobs, api.Job{ID: id, User: "bo", State: api.StateQueued, Priority: api.PriorityNormal})
		many.Events = append(many.Events, store.JobEvent{JobID: id, Event: api.Event{At: at, To: api.StateQueued}})
	}
	if err := s.Commit(ctx, &many); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, o)
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 151 || st.Jobs[0].ID != "j1" || st.Jobs[0].State != api.StateRunning || st.Jobs[0].Priority != api.PriorityHigh || st.Jobs[0].User != "ana" {
		t.Fatalf("jobs = %d, first %+v", len(st.Jobs), st.Jobs[0])
	}
	if len(st.Jobs[0].Events) != 2 || st.Jobs[0].Events[1].To != api.StateRunning {
		t.Fatalf("events = %+v", st.Jobs[0].Events)
	}
	for i, jb := range st.Jobs[1:] {
		if want := fmt.Sprintf("m%03d", i); jb.ID != want || len(jb.Events) != 1 {
			t.Fatalf("job %d = %s with %d events, want %s with 1", i+1, jb.ID, len(jb.Events), want)
		}
	}
	if st.Idempotency["k1"] != "j1" || st.Settings["policy"] != "fairshare" || len(st.Holds) != 1 || st.Holds[0].Allocation[0].GPUID != 3 {
		t.Fatalf("state = %+v", st)
	}
	if st.Nodes["n1"] != `{"id":"n1","v":2}` {
		t.Fatalf("nodes = %v", st.Nodes)
	}
}

func testGroupCommitIsolatesFailures(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	sub := func(i int) *store.Batch {
		id := fmt.Sprintf("g%03d", i)
		return &store.Batch{
			Jobs:        []api.Job{{ID: id, User: "ana", State: api.StateQueued, Priority: api.PriorityNormal}},
			Events:      []store.JobEvent{{JobID: id, Event: api.Event{At: at, To: api.StateQueued}}},
			Idempotency: map[string]string{fmt.Sprintf("key-%d", i): id},
		}
	}
	if err := s.Commit(ctx, sub(0)); err != nil {
		t.Fatal(err)
	}
	const writers = 50
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := 1; i <= writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := sub(i)
			if i%10 == 0 {
				b.Idempotency = map[string]string{"key-0": b.Jobs[0].ID} // fails, job row included
			}
			errs[i-1] = s.Commit(ctx, b)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != ((i+1)%10 == 0) {
			t.Errorf("commit %d: %v", i+1, err)
		}
	}
	s.Close()
	if err := s.Commit(ctx, sub(99)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("commit after Close: %v, want ErrClosed", err)
	}
	s = open(t, o)
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != writers+1-writers/10 {
		t.Fatalf("%d jobs, want %d", len(st.Jobs), writers+1-writers/10)
	}
	for _, j := range st.Jobs {
		if len(j.Events) != 1 {
			t.Errorf("job %s has %d events", j.ID, len(j.Events))
		}
	}
}

func testAudit(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	for i := range 5 {
		user := "ana"
		if i%2 == 1 {
			user = "bo"
		}
		e := api.AuditEntry{At: at.Add(time.Duration(i) * time.Minute), User: user, Action: "job.submit", Method: "POST", Path: "/jobs"}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, &store.Batch{Audit: []api.AuditEntry{{At: at.Add(time.Hour), User: "ana", Action: "token.revoke"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Audit(ctx, store.AuditFilter{User: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].Action != "token.revoke" || got[0].Seq <= got[1].Seq {
		t.Fatalf("audit of ana = %+v", got)
	}
	got, err = s.Audit(ctx, store.AuditFilter{Action: "job.", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].User != "ana" || got[1].User != "bo" {
		t.Fatalf("audit job. limit 2 = %+v", got)
	}
	n, err := s.PruneAudit(ctx, at.Add(2*time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("prune = %d, %v; want 2", n, err)
	}
}

func testTokens(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	for _, id := range []string{"t2", "t1", "t3"} {
		tok := store.TokenRecord{Token: api.Token{ID: id, User: "ana"}, Hash: "h" + id}
		if err := s.PutToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tok := range got {
		ids = append(ids, tok.ID)
	}
	if strings.Join(ids, ",") != "t2,t1,t3" { // in the order they were made
		t.Fatalf("tokens = %v", ids)
	}
}

func testOutbox(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	b := &store.Batch{
		Jobs:   []api.Job{{ID: "j1", State: api.StateCompleted, Priority: api.PriorityNormal}},
		Outbox: []store.OutboxItem{{EndpointID: "e1", Kind: "job.completed", CreatedAt: at, NextAt: at, Data: `{"job":"j1"}`}},
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendOutbox(ctx, store.OutboxItem{EndpointID: "e2", Kind: "job.failed", CreatedAt: at, NextAt: at.Add(time.Hour), Data: `{}`}); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueOutbox(ctx, at.Add(time.Minute), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].EndpointID != "e1" || due[0].Data != `{"job":"j1"}` || !due[0].CreatedAt.Equal(at) {
		t.Fatalf("due = %+v", due)
	}
	next, ok, err := s.NextOutbox(ctx, at.Add(time.Minute))
	if err != nil || !ok || !next.Equal(at.Add(time.Hour)) {
		t.Fatalf("next = %v, %v, %v", next, ok, err)
	}
	if err := s.UpdateOutbox(ctx, store.OutboxUpdate{Seq: due[0].Seq, State: store.OutboxDelivered, Attempts: 1, DeliveredAt: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	pending, err := s.PendingOutbox(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].EndpointID != "e2" {
		t.Fatalf("pending = %+v", pending)
	}
	all, err := s.Outbox(ctx, store.OutboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].EndpointID != "e2" || all[1].State != store.OutboxDelivered {
		t.Fatalf("outbox = %+v", all)
	}
}

func testEndpointsAndDefaults(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	for _, id := range []string{"b", "a"} {
		if err := s.PutEndpoint(ctx, store.EndpointRecord{ID: id, Data: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutEndpoint(ctx, store.EndpointRecord{ID: "b", Data: `{"v":2}`}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEndpoint(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	eps, err := s.Endpoints(ctx)
	if err != nil || len(eps) != 1 || eps[0].Data != `{"v":2}` {
		t.Fatalf("endpoints = %+v, %v", eps, err)
	}
	if err := s.PutNotifyDefault(ctx, store.NotifyDefaultRecord{User: "ana", Data: "{}"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNotifyDefault(ctx, store.NotifyDefaultRecord{User: "bo", Data: "{}"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNotifyDefault(ctx, "bo"); err != nil {
		t.Fatal(err)
	}
	ds, err := s.NotifyDefaults(ctx)
	if err != nil || len(ds) != 1 || ds[0].User != "ana" {
		t.Fatalf("defaults = %+v, %v", ds, err)
	}
}

func testHistory(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	for i := range 4 {
		when := at.Add(time.Duration(i) * time.Minute)
		if err := s.PutHistory(ctx, when, []byte(fmt.Sprintf(`{"i":%d}`, i)), at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.History(ctx, at.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || !rows[0].At.Equal(at.Add(2*time.Minute)) || string(rows[1].Data) != `{"i":3}` {
		t.Fatalf("history = %+v", rows)
	}
}

func testArrays(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	rec := store.ArrayRecord{Array: api.Array{ID: "a1", User: "ana", Array: "0-3", Tasks: []int{0, 1, 2, 3}, Priority: api.PriorityNormal}, Template: api.Job{Command: "echo", Priority: api.PriorityNormal}}
	if err := s.Commit(ctx, &store.Batch{Arrays: []store.ArrayRecord{rec}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, o)
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || st.Arrays[0].Array.ID != "a1" || len(st.Arrays[0].Array.Tasks) != 4 || st.Arrays[0].Template.Command != "echo" {
		t.Fatalf("arrays = %+v", st.Arrays)
	}

	// a1 ends (task 2 failed first, the others completed): its last batch
	// marks it done. Start-up no longer loads it or its tasks; the store
	// reads its counts, the task that decides a dependency, its id.
	b := &store.Batch{}
	for i, st := range []api.State{api.StateCompleted, api.StateCompleted, api.StateFailed, api.StateCompleted} {
		end := at.Add(time.Duration(10-i) * time.Minute)
		b.Jobs = append(b.Jobs, api.Job{ID: fmt.Sprintf("a1_%d", i), ArrayJobID: "a1", ArrayTaskID: &i, User: "ana", State: st, Priority: api.PriorityNormal, SubmittedAt: at, FinishedAt: &end})
		b.Ended = append(b.Ended, store.EndedJob{User: "ana", State: st, FinishedAt: end})
	}
	rec.Finished = at.Add(10 * time.Minute)
	b.Arrays = []store.ArrayRecord{rec}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, o)
	if st, err = s.Load(ctx); err != nil || len(st.Arrays) != 0 || len(st.Jobs) != 0 {
		t.Fatalf("after a1 is done, Load = %d arrays, %d jobs, %v: want none", len(st.Arrays), len(st.Jobs), err)
	}
	got, err := s.Array(ctx, "a1")
	if err != nil || got.Array.Counts != (api.ArrayCounts{Completed: 3, Failed: 1}) || !got.Finished.Equal(rec.Finished) || len(got.Array.Tasks) != 4 {
		t.Fatalf("Array(a1) = %+v, %v", got, err)
	}
	if j, err := s.FirstEnded(ctx, "a1", api.StateFailed, api.StateCanceled); err != nil || j.ID != "a1_2" {
		t.Fatalf("FirstEnded(a1, failed) = %s, %v", j.ID, err)
	}
	if j, err := s.Job(ctx, "a1_0"); err != nil || len(j.Events) == 0 || j.Events[0].Reason != api.ReasonSubmitted {
		t.Fatalf("Job(a1_0) = %+v, %v: want it with its array's submission event", j, err)
	}
	if ids, err := s.DependencyIDs(ctx, "a1", 5); err != nil || len(ids) != 1 || ids[0] != "a1" {
		t.Fatalf("DependencyIDs(a1) = %v, %v", ids, err)
	}
	if n, err := s.CountFinished(ctx); err != nil || n[api.StateCompleted] != 3 || n[api.StateFailed] != 1 {
		t.Fatalf("CountFinished = %v, %v", n, err)
	}

	// Pruning: not while a waiting job names a1, not before its last task
	// ended; then whole, its tasks out of the counts.
	if tasks, arrays, err := s.PruneDoneArrays(ctx, at.Add(time.Hour), 10, []string{"a1"}); err != nil || len(tasks)+len(arrays) != 0 {
		t.Fatalf("PruneDoneArrays keeping a1 = %v %v, %v", tasks, arrays, err)
	}
	if tasks, arrays, err := s.PruneDoneArrays(ctx, at.Add(5*time.Minute), 10, nil); err != nil || len(tasks)+len(arrays) != 0 {
		t.Fatalf("PruneDoneArrays before a1's end = %v %v, %v", tasks, arrays, err)
	}
	tasks, arrays, err := s.PruneDoneArrays(ctx, at.Add(time.Hour), 10, nil)
	if err != nil || len(tasks) != 4 || len(arrays) != 1 || arrays[0] != "a1" {
		t.Fatalf("PruneDoneArrays = %v %v, %v; want a1 and its 4 tasks", tasks, arrays, err)
	}
	if _, err := s.Array(ctx, "a1"); err == nil {
		t.Fatal("Array(a1) after pruning: found")
	}
	if _, err := s.Job(ctx, "a1_0"); err == nil {
		t.Fatal("Job(a1_0) after pruning: found")
	}
	if n, err := s.CountFinished(ctx); err != nil || n[api.StateCompleted] != 0 || n[api.StateFailed] != 0 {
		t.Fatalf("CountFinished after pruning = %v, %v", n, err)
	}
}

// testLease: the leader lease goes to one holder at a time, with an epoch
// that only grows, and Leader names the holder and its address until the
// lease expires or is given up.
func testLease(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	ttl := 9 * time.Second
	if l, err := s.Leader(ctx, at); err != nil || l.Holder != "" {
		t.Fatalf("Leader of a new store = %+v, %v; want none", l, err)
	}
	if err := s.SetServerAddress(ctx, "a", "http://a:7450"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetServerAddress(ctx, "b", "http://old-b:7450"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetServerAddress(ctx, "b", "http://b:7450"); err != nil { // restarted with a new address
		t.Fatal(err)
	}
	e1, ok, err := s.AcquireLease(ctx, "a", 0, at, ttl)
	if err != nil || !ok {
		t.Fatalf("a takes a free lease: %d %v %v", e1, ok, err)
	}
	if _, ok, _ := s.AcquireLease(ctx, "b", 0, at.Add(time.Second), ttl); ok {
		t.Fatal("b took a lease a holds")
	}
	l, err := s.Leader(ctx, at.Add(time.Second))
	if err != nil || l.Holder != "a" || l.Address != "http://a:7450" || l.Epoch != e1 {
		t.Fatalf("Leader while a holds = %+v, %v", l, err)
	}
	if l, _ := s.Leader(ctx, at.Add(ttl)); l.Holder != "" {
		t.Fatalf("Leader after the TTL = %+v; want none", l)
	}
	e2, ok, err := s.AcquireLease(ctx, "b", 0, at.Add(ttl), ttl)
	if err != nil || !ok || e2 <= e1 {
		t.Fatalf("b takes an expired lease: epoch %d (a had %d) %v %v", e2, e1, ok, err)
	}
	if l, _ := s.Leader(ctx, at.Add(ttl+time.Second)); l.Holder != "b" || l.Address != "http://b:7450" {
		t.Fatalf("Leader after b took over = %+v", l)
	}
	if err := s.ReleaseLease(ctx, "b", e2); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.Leader(ctx, at.Add(ttl+time.Second)); l.Holder != "" {
		t.Fatalf("Leader after b gave the lease up = %+v", l)
	}
}
