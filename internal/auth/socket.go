package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The login socket: a Unix socket that any local user may connect to
// (mode 0666), which signs its caller in as their own Unix account. The
// kernel tells the server who connected (SO_PEERCRED: PeerCred), as munge
// tells Slurm, so no secret is handed out. It speaks HTTP: POST /login
// with an api.LoginRequest, answered with an api.LoginAnswer (201) or the
// API's error body. `corral server`/`corral up` serve it and issue the
// token themselves; `corral agent` serves it and asks its server
// (POST /auth/login/node), vouching for the caller.

// LoginSocketPath is where `corral login` looks for a login socket unless
// $CORRAL_LOGIN_SOCKET names one, and where a server run as root serves
// it by default.
const LoginSocketPath = "/run/corral/login.sock"

// IssueFunc issues the token of a local caller, already checked against
// the socket's LocalPolicy: c is who connected, user their account.
type IssueFunc func(ctx context.Context, c Cred, user string, req api.LoginRequest) (api.LoginAnswer, error)

// LoginSocket serves a login socket. Its zero Policy signs in every local
// account but root.
type LoginSocket struct {
	Policy LocalPolicy
	Issue  IssueFunc
	Log    *slog.Logger
}

type credKey struct{}

// Serve answers calls on ln until ctx ends or ln fails.
func (l *LoginSocket) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", l.login)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, api.NotFound("the login socket answers POST /login only"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			cred, err := PeerCred(c)
			if err != nil {
				return context.WithValue(ctx, credKey{}, err)
			}
			return context.WithValue(ctx, credKey{}, cred)
		}}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (l *LoginSocket) login(w http.ResponseWriter, r *http.Request) {
	cred, ok := r.Context().Value(credKey{}).(Cred)
	if !ok {
		err, _ := r.Context().Value(credKey{}).(error)
		writeErr(w, &api.Error{Status: 500, Code: "no_peer_credentials", Message: fmt.Sprintf("the caller's uid is unknown: %v", err)})
		return
	}
	var req api.LoginRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeErr(w, api.BadRequest("malformed_json", "", "the body is not a login request: %v", err))
		return
	}
	log := l.Log
	if log == nil {
		log = slog.Default()
	}
	name, err := l.Policy.Account(cred.UID)
	if err != nil {
		log.Info("login socket: refused", "uid", cred.UID, "pid", cred.PID, "why", err)
		writeErr(w, api.Forbidden("login_refused", err.Error()))
		return
	}
	ans, err := l.Issue(r.Context(), cred, name, req)
	if err != nil {
		log.Warn("login socket: no token", "user", name, "uid", cred.UID, "err", err)
		writeErr(w, err)
		return
	}
	log.Info("login socket: signed in", "user", name, "uid", cred.UID, "pid", cred.PID, "token_id", ans.ID)
	w.Header().Set("Cache-Control", "no-store")
	writeJSONTo(w, http.StatusCreated, ans)
}

func writeErr(w http.ResponseWriter, err error) {
	e := api.AsError(err)
	writeJSONTo(w, e.Status, api.ErrorBody{Error: api.ErrorDetail{Code: e.Code, Message: e.Message, Field: e.Field}})
}

func writeJSONTo(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// ListenLoginSocket listens on a Unix socket at path that every local
// user may connect to (mode 0666; its directory is made 0755 when
// missing). A socket file left by a server that is gone is replaced; one
// another process still answers on is not (an error).
func ListenLoginSocket(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("login socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("login socket: %s exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("login socket: another process serves %s", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("login socket: %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("login socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("login socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("login socket: %w", err)
	}
	return ln, nil
}
