package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// leaderServer answers submissions, recording the body and token it got.
func leaderServer(t *testing.T, gotBody, gotAuth *atomic.Value) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(string(b))
		gotAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(api.Job{ID: "j1", Name: "x", Priority: api.PriorityNormal})
	}))
	t.Cleanup(s.Close)
	return s
}

// followerServer redirects every request to leader, as a follower does.
func followerServer(t *testing.T, leader func() string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := leader()
		if l == "" {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "no_leader", Message: "no server leads"}})
			return
		}
		w.Header().Set("Location", l+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	t.Cleanup(s.Close)
	return s
}

// deadURL is the address of a port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

func TestSeveralServers(t *testing.T) {
	ctx := context.Background()
	req := api.SubmitRequest{Command: "train", Name: "x"}
	var body, auth atomic.Value
	leader := leaderServer(t, &body, &auth)
	// The follower names the leader by another host name (localhost vs
	// 127.0.0.1): Go's client would drop the token on that redirect.
	leaderAddr := strings.Replace(leader.URL, "127.0.0.1", "localhost", 1)
	follower := followerServer(t, func() string { return leaderAddr })

	t.Run("follows a follower's 307 with body and token", func(t *testing.T) {
		c := New(deadURL(t)+","+follower.URL+","+leaderAddr, WithToken("tok"))
		if _, err := c.Submit(ctx, req, "key-1"); err != nil {
			t.Fatal(err)
		}
		if b, _ := body.Load().(string); !strings.Contains(b, `"command":"train"`) {
			t.Errorf("the leader got body %q", b)
		}
		if a, _ := auth.Load().(string); a != "Bearer tok" {
			t.Errorf("the leader got Authorization %q", a)
		}
		if c.BaseURL() != leaderAddr {
			t.Errorf("BaseURL after the redirect = %s; want the leader %s", c.BaseURL(), leaderAddr)
		}
	})

	t.Run("no token to a host it was not given", func(t *testing.T) {
		auth.Store("")
		c := New(follower.URL, WithToken("tok"))
		if _, err := c.Submit(ctx, req, ""); err != nil {
			t.Fatal(err)
		}
		if a, _ := auth.Load().(string); a != "" {
			t.Errorf("the token went to %s, which is not among the client's servers: %q", leaderAddr, a)
		}
	})

	t.Run("waits out a fail-over", func(t *testing.T) {
		var lead atomic.Value
		lead.Store("")
		f := followerServer(t, func() string { return lead.Load().(string) })
		c := New(deadURL(t)+","+f.URL, WithToken("tok"), WithFailoverWait(20*time.Second))
		done := make(chan error, 1)
		go func() { _, err := c.Submit(ctx, req, "key-2"); done <- err }()
		select {
		case err := <-done:
			t.Fatalf("the submit ended while no server led: %v", err)
		case <-time.After(300 * time.Millisecond): // it must still be trying; the test's wait, not a sync
		}
		lead.Store(leader.URL)
		if err := <-done; err != nil {
			t.Fatalf("after the fail-over: %v", err)
		}
	})

	t.Run("gives up after the wait, naming the servers", func(t *testing.T) {
		a, b := deadURL(t), deadURL(t)
		c := New(a+","+b, WithFailoverWait(300*time.Millisecond))
		_, err := c.Submit(ctx, req, "")
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
			t.Fatalf("err = %v; want unreachable naming both servers", err)
		}
	})

	t.Run("a refusal is not retried elsewhere", func(t *testing.T) {
		var calls atomic.Int32
		refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.WriteHeader(http.StatusUnprocessableEntity)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_field", Field: "command", Message: "bad"}})
		}))
		defer refuse.Close()
		c := New(refuse.URL + "," + leaderAddr)
		if _, err := c.Submit(ctx, req, ""); !errors.Is(err, api.ErrInvalid) {
			t.Fatalf("err = %v; want the 422", err)
		}
		if calls.Load() != 1 {
			t.Errorf("%d calls", calls.Load())
		}
	})
}

func TestNormalizeServerURLs(t *testing.T) {
	got, err := NormalizeServerURLs(" a:7450, http://b:7450/ ,a:7450")
	if err != nil || strings.Join(got, ",") != "http://a:7450,http://b:7450" {
		t.Fatalf("= %v, %v", got, err)
	}
	for _, bad := range []string{"a:7450,", "a:7450,,b:7450", "a:7450,ftp://b"} {
		if _, err := NormalizeServerURLs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
