package agent

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestLinkFindsTheLeader: an agent given several server addresses skips
// one that cannot be reached and one where no server leads, follows a
// follower's 307 to the leader with its join token, and then starts with
// the leader.
func TestLinkFindsTheLeader(t *testing.T) {
	var gotAuth atomic.Value
	var leaderCalls atomic.Int32
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaderCalls.Add(1)
		gotAuth.Store(r.Header.Get("Authorization"))
		json.NewEncoder(w).Encode(api.AgentConfig{Session: "s1"})
	}))
	defer leader.Close()
	leaderAddr := strings.Replace(leader.URL, "127.0.0.1", "localhost", 1) // another host to Go's client
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", leaderAddr+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer follower.Close()
	noLeader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "no_leader", Message: "none leads"}})
	}))
	defer noLeader.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	list := dead + "," + noLeader.URL + "," + follower.URL + "," + leaderAddr
	l, err := NewHTTPLink(list, "join", "")
	if err != nil {
		t.Fatal(err)
	}
	if l.Base() != list {
		t.Errorf("Base() = %q; want %q", l.Base(), list)
	}
	cfg, err := l.Register(context.Background(), api.AgentRegistration{NodeID: "n1"})
	if err != nil || cfg.Session != "s1" {
		t.Fatalf("Register = %+v, %v", cfg, err)
	}
	if a, _ := gotAuth.Load().(string); a != "Bearer join" {
		t.Errorf("the leader got Authorization %q", a)
	}
	if l.current() != leaderAddr {
		t.Errorf("after the redirect the link starts with %s; want the leader %s", l.current(), leaderAddr)
	}
	// The next call goes straight to the leader.
	if _, err := l.Register(context.Background(), api.AgentRegistration{NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	if leaderCalls.Load() != 2 {
		t.Errorf("leader calls = %d", leaderCalls.Load())
	}
	if _, err := NewHTTPLink("a:7450,,b:7450", "join", ""); err == nil {
		t.Error("an empty entry was accepted")
	}
}
