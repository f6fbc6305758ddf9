package server

import (
	"net/http"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
)

// defaultsUser returns whose notification defaults a call of
// /notify/defaults reads or sets: the caller's own, or with ?user=X an
// admin's choice of user. Anyone else naming another user is refused 403
// (user_mismatch, field user); a bad name is a 422 naming user.
func defaultsUser(r *http.Request) (string, error) {
	p := principal(r)
	u := strings.TrimSpace(r.URL.Query().Get("user"))
	switch {
	case u == "" || u == p.User:
		return p.User, nil
	case !p.IsAdmin():
		return "", &api.Error{Status: http.StatusForbidden, Code: "user_mismatch", Field: "user",
			Message: "only admins may read or set another user's notification defaults"}
	case !auth.ValidName(u):
		return "", api.Invalid("user", "%q is not a valid user name", truncate(u, 40))
	}
	return u, nil
}

// notifyDefaults is GET /notify/defaults: the caller's own notification
// defaults (admins: ?user=X's); builtin when they have set none.
func (s *Server) notifyDefaults(w http.ResponseWriter, r *http.Request) error {
	user, err := defaultsUser(r)
	if err != nil {
		return err
	}
	if s.notify == nil {
		return writeJSON(w, http.StatusOK, api.NotifyDefaults{User: user, Builtin: true})
	}
	return writeJSON(w, http.StatusOK, s.notify.Endpoints.Defaults(user))
}

// setNotifyDefaults is PUT /notify/defaults, body {"notify": "begin,end"}:
// sets the caller's own notification defaults (admins: ?user=X's), or with
// "default" goes back to the built-in ones. A bad value is a 422 naming
// notify and changes nothing. Audited as notify.defaults, its target the
// user.
func (s *Server) setNotifyDefaults(w http.ResponseWriter, r *http.Request) error {
	var req api.NotifyDefaultsRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	user, err := defaultsUser(r)
	if err != nil {
		return err
	}
	setTarget(r, user)
	if s.notify == nil {
		return notifyOff()
	}
	d, err := s.notify.Endpoints.SetDefaults(r.Context(), user, req.Notify, principal(r).User)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, d)
}
