package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func failedJob() Event {
	code := 2
	return Event{Kind: JobFailed, At: time.Unix(5000, 0).UTC(), Job: &JobInfo{ID: "j9", Name: "train", User: "ana", Project: "nlp", State: "failed",
		Message: "exit code 2", ExitCode: &code, RuntimeSeconds: 754, GPUs: 4, Nodes: []string{"gpu-07"}, URL: "https://c.example/#/jobs/j9",
		LogTail: []string{"epoch 3", "CUDA error: out of memory"}}}
}

// TestHTTPWebhookSigned: a real receiver checks the signature of the exact
// body, reads event_id, and its answers decide what is retried.
func TestHTTPWebhookSigned(t *testing.T) {
	const secret = "whsec-test-123"
	status := http.StatusNoContent
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !Verify(secret, body, r.Header.Get(SignatureHeader)) || !strings.HasPrefix(r.Header.Get(SignatureHeader), "sha256=") {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		if m["event_id"] != r.Header.Get(EventIDHeader) {
			http.Error(w, "event id", http.StatusBadRequest)
			return
		}
		got = append(got, m)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	h := HTTP{AllowLocal: true} // the receiver is on 127.0.0.1
	tg := Target{ID: "ne_1", Kind: api.EndpointWebhook, URL: srv.URL + "/hook", Secret: secret}
	m := Message{EventID: "n7", Items: []Item{{EventID: "n7", Event: failedJob()}}}
	if err := h.Deliver(context.Background(), tg, m); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0]["kind"] != "job.failed" || got[0]["event_id"] != "n7" {
		t.Fatalf("received %v", got)
	}
	job := got[0]["job"].(map[string]any)
	if job["exit_code"] != 2.0 || job["gpus"] != 4.0 || len(job["log_tail"].([]any)) != 2 {
		t.Errorf("job %v", job)
	}
	if txt := got[0]["text"].(string); !strings.Contains(txt, "Runtime: 12m34s   GPUs: 4 on gpu-07") || !strings.Contains(txt, "CUDA error") {
		t.Errorf("text %q", txt)
	}
	// A wrong secret is refused by the receiver: a permanent error.
	bad := tg
	bad.Secret = "another-secret"
	var p Permanent
	if err := h.Deliver(context.Background(), bad, m); !errors.As(err, &p) {
		t.Errorf("a 401 answer: %v, want a permanent error", err)
	}
	// 503 is retried (not permanent); its error does not name the URL.
	status = http.StatusServiceUnavailable
	err := h.Deliver(context.Background(), tg, m)
	if err == nil || errors.As(err, &p) || strings.Contains(err.Error(), "/hook") {
		t.Errorf("a 503 answer: %v", err)
	}
	// A digest carries each event with its own event_id.
	status = http.StatusOK
	d := Message{EventID: "d7", Items: []Item{{EventID: "n7", Event: failedJob()}, {EventID: "n8", Event: failedJob()}}}
	if err := h.Deliver(context.Background(), tg, d); err != nil {
		t.Fatal(err)
	}
	last := got[len(got)-1]
	evs := last["events"].([]any)
	if last["kind"] != "digest" || last["count"] != 2.0 || len(evs) != 2 || evs[1].(map[string]any)["event_id"] != "n8" {
		t.Errorf("digest %v", last)
	}
}

// TestHTTPSlack: Slack gets blocks and text (Mattermost reads text), no
// signature header.
func TestHTTPSlack(t *testing.T) {
	var body map[string]any
	var sig string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sig = r.Header.Get(SignatureHeader)
		json.Unmarshal(b, &body)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	m := Message{EventID: "n1", Items: []Item{{EventID: "n1", Event: failedJob()}}}
	if err := (HTTP{AllowLocal: true}).Deliver(context.Background(), Target{Kind: api.EndpointSlack, URL: srv.URL}, m); err != nil {
		t.Fatal(err)
	}
	blocks, _ := body["blocks"].([]any)
	text, _ := body["text"].(string)
	if len(blocks) < 3 || !strings.Contains(text, "Job train (j9) (ana): failed: exit code 2") || sig != "" {
		t.Fatalf("slack body %v (signature %q)", body, sig)
	}
	all, _ := json.Marshal(blocks)
	for _, w := range []string{"```", "CUDA error", "https://c.example/#/jobs/j9", "Exit code: 2"} {
		if !strings.Contains(string(all), w) {
			t.Errorf("blocks lack %q: %s", w, all)
		}
	}
}

// TestHTTPRefusesLinkLocal: an endpoint on a link-local address (a cloud's
// metadata service) is refused before any connection, for good.
func TestHTTPRefusesLinkLocal(t *testing.T) {
	m := Message{EventID: "n1", Items: []Item{{EventID: "n1", Event: failedJob()}}}
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "http://[fe80::1]:80/x", "http://0.0.0.0:9/"} {
		err := NewHTTP(false).Deliver(context.Background(), Target{Kind: api.EndpointWebhook, URL: u, Secret: "s3cret-key"}, m)
		var p Permanent
		if !errors.As(err, &p) || !strings.Contains(err.Error(), "not sent to") {
			t.Errorf("%s: %v, want a permanent refusal", u, err)
		}
	}
}

// TestSlackEscapes: a job name cannot ping a channel or forge a link.
func TestSlackEscapes(t *testing.T) {
	ev := failedJob()
	ev.Job.Name = "<!channel> <https://evil.example|click>"
	b, err := SlackBody(Message{EventID: "n1", Items: []Item{{EventID: "n1", Event: ev}}})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Text string `json:"text"`
	}
	json.Unmarshal(b, &body)
	if strings.Contains(string(b), "<!channel>") || strings.Contains(body.Text, "<!channel>") || !strings.Contains(body.Text, "&lt;!channel&gt;") {
		t.Errorf("not escaped: %s", b)
	}
}
