package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
)

// fakeNotifications is the notification routes' backing with the fakes:
// an in-memory store and a recording deliverer.
func fakeNotifications(t testing.TB) Notifications {
	t.Helper()
	st := &notify.MemStore{}
	seal, err := notify.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := notify.NewRegistry(context.Background(), st, seal, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd := notify.NewSender(notify.SenderConfig{Store: st, Registry: reg, Deliverer: &notify.Recorder{}})
	return Notifications{Endpoints: reg, Sender: snd, Log: st}
}

// TestEndpointSecretsShownOnce: the answer to the POST shows the URL and
// secret; lists, the delivery log and the audit trail never do.
func TestEndpointSecretsShownOnce(t *testing.T) {
	e := newAuthEnv(t)
	const url = "https://hooks.example.com/services/T0/B0/SECRETPATH123"
	const secret = "whsec-0123456789abcdef"
	resp, b := e.do("owner", "POST", "/notify/endpoints", `{"kind":"webhook","url":"`+url+`","secret":"`+secret+`"}`, nil)
	if resp.StatusCode != 201 {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	var ep api.Endpoint
	if err := json.Unmarshal(b, &ep); err != nil {
		t.Fatal(err)
	}
	if ep.URL != url || ep.Secret != secret || ep.Owner != "alice" || ep.Scope != "user" {
		t.Fatalf("the answer to the POST: %+v", ep)
	}
	for _, c := range []struct{ caller, path string }{
		{"owner", "/notify/endpoints"}, {"admin", "/notify/endpoints"}, {"admin", "/notifications"}, {"admin", "/audit"},
	} {
		_, b := e.do(c.caller, "GET", c.path, "", nil)
		if strings.Contains(string(b), "SECRETPATH123") || strings.Contains(string(b), secret) {
			t.Errorf("GET %s as %s shows the secret: %s", c.path, c.caller, b)
		}
	}
	_, b = e.do("owner", "GET", "/notify/endpoints", "", nil)
	var l api.EndpointList
	if err := json.Unmarshal(b, &l); err != nil || len(l.Endpoints) != 1 || l.Endpoints[0].Target != "https://hooks.example.com/…" || !l.Endpoints[0].HasSecret {
		t.Fatalf("list: %s", b)
	}
	// bob manages none of alice's.
	_, b = e.do("other", "GET", "/notify/endpoints", "", nil)
	if strings.Contains(string(b), ep.ID) {
		t.Errorf("bob sees alice's endpoint: %s", b)
	}
}

// TestEndpointBadInput: each bad request is refused naming its field, and
// changes nothing.
func TestEndpointBadInput(t *testing.T) {
	e := newAuthEnv(t)
	cases := map[string]struct {
		caller, body string
		status       int
		field        string
	}{
		"no kind":            {"owner", `{"url":"https://x.example.com"}`, 422, "kind"},
		"bad kind":           {"owner", `{"kind":"pager","url":"https://x.example.com"}`, 422, "kind"},
		"not http":           {"owner", `{"kind":"slack","url":"file:///etc/passwd"}`, 422, "url"},
		"no url":             {"owner", `{"kind":"slack"}`, 422, "url"},
		"webhook no secret":  {"owner", `{"kind":"webhook","url":"https://x.example.com"}`, 422, "secret"},
		"short secret":       {"owner", `{"kind":"webhook","url":"https://x.example.com","secret":"abc"}`, 422, "secret"},
		"slack secret":       {"owner", `{"kind":"slack","url":"https://x.example.com","secret":"abcdefghij"}`, 422, "secret"},
		"bad address":        {"owner", `{"kind":"email","address":"not-an-address"}`, 422, "address"},
		"bad scope":          {"owner", `{"kind":"slack","url":"https://x.example.com","scope":"world"}`, 422, "scope"},
		"cluster as user":    {"owner", `{"kind":"slack","url":"https://x.example.com","scope":"cluster"}`, 403, ""},
		"other's project":    {"owner", `{"kind":"slack","url":"https://x.example.com","scope":"project","project":"nlp"}`, 403, "project"},
		"other user":         {"owner", `{"kind":"slack","url":"https://x.example.com","user":"bob"}`, 403, "user"},
		"project no project": {"admin", `{"kind":"slack","url":"https://x.example.com","scope":"project"}`, 422, "project"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			resp, b := e.do(c.caller, "POST", "/notify/endpoints", c.body, nil)
			var eb api.ErrorBody
			json.Unmarshal(b, &eb)
			if resp.StatusCode != c.status || eb.Error.Field != c.field {
				t.Errorf("%d %s, want %d naming %q", resp.StatusCode, b, c.status, c.field)
			}
		})
	}
	if l := e.notify.Endpoints.List(func(api.Endpoint) bool { return true }); len(l) != 0 {
		t.Errorf("refused requests added endpoints: %+v", l)
	}
	// A project admin may add their project's; then the project's admin
	// (and not bob) manages it.
	resp, b := e.do("projadmin", "POST", "/notify/endpoints", `{"kind":"slack","url":"https://x.example.com/p","scope":"project","project":"nlp"}`, nil)
	if resp.StatusCode != 201 {
		t.Fatalf("project admin: %d %s", resp.StatusCode, b)
	}
	var ep api.Endpoint
	json.Unmarshal(b, &ep)
	if resp, _ := e.do("other", "DELETE", "/notify/endpoints/"+ep.ID, "", nil); resp.StatusCode != 403 {
		t.Errorf("bob removed nlp's endpoint: %d", resp.StatusCode)
	}
	if resp, _ := e.do("projadmin", "DELETE", "/notify/endpoints/"+ep.ID, "", nil); resp.StatusCode != 200 {
		t.Errorf("nlp's admin could not remove its endpoint: %d", resp.StatusCode)
	}
}

// TestNotificationLog: GET /notifications shows a user the rows of the
// endpoints they manage, with their summaries, and filters by state.
func TestNotificationLog(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	mine := e.endpoint()
	bobs, err := e.notify.Endpoints.Add(ctx, api.EndpointRequest{Kind: "slack", URL: "https://hooks.example.com/b", Scope: "user", User: "bob"}, "bob")
	if err != nil {
		t.Fatal(err)
	}
	st := e.notify.Log.(*notify.MemStore)
	at := time.Unix(3000, 0).UTC()
	ev := `{"kind":"job.failed","at":"1970-01-01T00:50:00Z","job":{"id":"j7","user":"alice","project":"nlp","state":"failed","message":"exit code 1","gpus":1,"attempt":0}}`
	st.AppendOutbox(ctx,
		store.OutboxItem{EndpointID: mine, Kind: "job.failed", CreatedAt: at, Data: ev},
		store.OutboxItem{EndpointID: bobs.ID, Kind: "job.failed", CreatedAt: at, Data: ev, State: store.OutboxDelivered, DeliveredAt: at})
	_, b := e.do("owner", "GET", "/notifications", "", nil)
	var l api.NotificationList
	if err := json.Unmarshal(b, &l); err != nil || len(l.Notifications) != 1 {
		t.Fatalf("alice's log: %s", b)
	}
	n := l.Notifications[0]
	if n.EndpointID != mine || n.JobID != "j7" || n.State != "pending" || n.EventID != notify.EventID(n.ID) || !strings.Contains(n.Summary, "failed: exit code 1") {
		t.Errorf("row %+v", n)
	}
	_, b = e.do("admin", "GET", "/notifications?state=delivered", "", nil)
	if err := json.Unmarshal(b, &l); err != nil || len(l.Notifications) != 1 || l.Notifications[0].EndpointID != bobs.ID || l.Notifications[0].DeliveredAt == nil {
		t.Errorf("admin, delivered: %s", b)
	}
	if resp, _ := e.do("owner", "GET", "/notifications?endpoint="+bobs.ID, "", nil); resp.StatusCode != 404 {
		t.Errorf("alice read bob's endpoint's log: %d", resp.StatusCode)
	}
}
