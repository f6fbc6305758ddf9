package server

import (
	"net/http"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/bookings"
)

// Bookings' routes (docs/bookings.md): GET and POST /reservations, GET,
// PATCH and DELETE /reservations/{name}. Anyone who may read sees every
// booking; users book for themselves within the weekly allowance, and
// change or delete their own; admins book and change anything (the rules
// are internal/feature/bookings').

// booker is the caller as the booking rules see them.
func booker(r *http.Request) bookings.Booker {
	p := principal(r)
	return bookings.Booker{User: p.User, Admin: p.IsAdmin()}
}

// listReservations is GET /reservations: every booking, by start.
func (s *Server) listReservations(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, api.ReservationList{Reservations: s.feat.Bookings.List()})
}

// reservation is GET /reservations/{name}.
func (s *Server) reservation(w http.ResponseWriter, r *http.Request) error {
	res, err := s.feat.Bookings.Get(r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

// createReservation is POST /reservations: 201 with the booking and the
// GPUs chosen for it, or 422 (403) naming the field that breaks a rule.
func (s *Server) createReservation(w http.ResponseWriter, r *http.Request) error {
	var req api.ReservationRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	setTarget(r, req.Name)
	res, err := s.feat.Bookings.Create(r.Context(), req, booker(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, res)
}

// updateReservation is PATCH /reservations/{name}: the fields given
// change, checked as at creation.
func (s *Server) updateReservation(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	setTarget(r, name)
	var req api.ReservationRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	res, err := s.feat.Bookings.Update(r.Context(), name, req, booker(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

// deleteReservation is DELETE /reservations/{name}: a booking not yet
// begun is forgotten, one in its window released.
func (s *Server) deleteReservation(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	setTarget(r, name)
	res, err := s.feat.Bookings.Delete(r.Context(), name, booker(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}
