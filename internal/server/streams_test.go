package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
)

// openStream opens a streaming GET with a bearer token (or, when cookie
// is set, the dashboard's session cookie) and reads until it has
// something (the first event, or the log's headers). It returns a
// channel that yields everything read after that once the stream ends.
func openStream(t *testing.T, url, secret string, cookie bool) <-chan string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a fail-safe
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if cookie {
		req.Header.Set("Cookie", sessionCookie+"="+secret)
	} else {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended before its first event: %v", err)
			}
			if strings.HasPrefix(line, "data: ") {
				break
			}
		}
	}
	rest := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		b, _ := io.ReadAll(br) // returns at the stream's end (or the fail-safe)
		rest <- string(b)
	}()
	return rest
}

// awaitEnd waits for a stream opened with openStream to end, at most
// within; it returns what came last.
func awaitEnd(t *testing.T, what string, rest <-chan string, within time.Duration) string {
	t.Helper()
	select {
	case s := <-rest:
		return s
	case <-time.After(within):
		t.Fatalf("%s did not end within %v", what, within)
		return ""
	}
}

// TestRevocationEndsStreams: revoking a token ends, within a second, the
// event stream and the followed log it opened, by bearer token or
// dashboard cookie; the event stream says why in an `ended` event.
func TestRevocationEndsStreams(t *testing.T) {
	e := newAuthEnv(t)
	job := e.job() // queued: following its log would go on until it ends
	for _, cookie := range []bool{false, true} {
		nt, err := e.a.Create(context.Background(), api.TokenRequest{User: "vic", Role: api.RoleViewer}, auth.Principal{User: "root", Role: api.RoleAdmin})
		if err != nil {
			t.Fatal(err)
		}
		events := openStream(t, e.url+"/events", nt.Secret, cookie)
		logs := openStream(t, e.url+"/jobs/"+job+"/logs?follow=true", nt.Secret, cookie)
		if resp, b := e.do("admin", "DELETE", "/auth/tokens/"+nt.ID, "", nil); resp.StatusCode != 200 {
			t.Fatalf("revoke: %d %s", resp.StatusCode, b)
		}
		revoked := time.Now()
		last := awaitEnd(t, "GET /events", events, time.Second)
		if !strings.Contains(last, "event: ended\ndata: {\"reason\":\"token_revoked\"}") {
			t.Errorf("cookie %v: the event stream ended without saying why: %q", cookie, truncate(last, 300))
		}
		awaitEnd(t, "GET /jobs/{id}/logs?follow=true", logs, time.Second-time.Since(revoked))
	}
}

// TestExpiryEndsStreams: a token's expiry ends its open streams at that
// time, not at the next request.
func TestExpiryEndsStreams(t *testing.T) {
	e := newAuthEnv(t)
	job := e.job()
	nt, err := e.a.Create(context.Background(), api.TokenRequest{User: "vic", Role: api.RoleViewer, ExpiresIn: api.RawValue(`"2s"`)},
		auth.Principal{User: "root", Role: api.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	events := openStream(t, e.url+"/events", nt.Secret, false)
	logs := openStream(t, e.url+"/jobs/"+job+"/logs?follow=true", nt.Secret, false)
	within := time.Until(*nt.ExpiresAt) + time.Second
	last := awaitEnd(t, "GET /events", events, within)
	if time.Now().Before(*nt.ExpiresAt) {
		t.Errorf("the event stream ended before the token expired")
	}
	if !strings.Contains(last, `{"reason":"token_expired"}`) {
		t.Errorf("the event stream ended without saying why: %q", truncate(last, 300))
	}
	awaitEnd(t, "GET /jobs/{id}/logs?follow=true", logs, time.Until(*nt.ExpiresAt)+time.Second)
}
