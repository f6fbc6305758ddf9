package server

import (
	"context"
	"errors"
	"net/http"
)

// Why a stream's context ended when its credential did (context.Cause).
var (
	errTokenRevoked = errors.New("the token was revoked")
	errTokenExpired = errors.New("the token has expired")
)

// streamContext is the context of a streaming answer (GET /events, a
// followed log): r's, ended also when the caller's token stops working,
// at once on revocation (auth.Service.Ended) and at its expiry. Its
// cause (context.Cause) is then errTokenRevoked or errTokenExpired. The
// caller must call the cancel function when the stream ends.
func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(r.Context())
	stop := func() { cancel(context.Canceled) }
	p := principal(r)
	if s.auth == nil || p.TokenID == "" {
		return ctx, stop
	}
	if p.ExpiresAt != nil {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadlineCause(ctx, *p.ExpiresAt, errTokenExpired)
		stop = func() { cancelDeadline(); cancel(context.Canceled) }
	}
	ended := s.auth.Ended(p.TokenID)
	go func() {
		select {
		case <-ended:
			cancel(errTokenRevoked)
		case <-ctx.Done():
		}
	}()
	return ctx, stop
}

// credentialEnded reports whether ctx ended because its token stopped
// working, and why.
func credentialEnded(ctx context.Context) (string, bool) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTokenRevoked):
		return "token_revoked", true
	case errors.Is(cause, errTokenExpired):
		return "token_expired", true
	}
	return "", false
}
