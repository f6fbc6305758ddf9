package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/corral-sched/corral/internal/api"
)

// Reservations lists every booking (GET /reservations).
func (c *Client) Reservations(ctx context.Context) ([]api.Reservation, error) {
	var l api.ReservationList
	err := c.call(ctx, request{method: http.MethodGet, path: "/reservations"}, &l)
	return l.Reservations, err
}

// Reservation returns one booking (GET /reservations/{name}).
func (c *Client) Reservation(ctx context.Context, name string) (api.Reservation, error) {
	var r api.Reservation
	err := c.call(ctx, request{method: http.MethodGet, path: "/reservations/" + url.PathEscape(name)}, &r)
	return r, err
}

// CreateReservation books GPUs (POST /reservations).
func (c *Client) CreateReservation(ctx context.Context, req api.ReservationRequest) (api.Reservation, error) {
	var r api.Reservation
	err := c.call(ctx, request{method: http.MethodPost, path: "/reservations", body: req}, &r)
	return r, err
}

// UpdateReservation changes a booking (PATCH /reservations/{name}).
func (c *Client) UpdateReservation(ctx context.Context, name string, req api.ReservationRequest) (api.Reservation, error) {
	var r api.Reservation
	err := c.call(ctx, request{method: http.MethodPatch, path: "/reservations/" + url.PathEscape(name), body: req}, &r)
	return r, err
}

// DeleteReservation deletes a booking, or releases it once begun (DELETE
// /reservations/{name}).
func (c *Client) DeleteReservation(ctx context.Context, name string) (api.Reservation, error) {
	var r api.Reservation
	err := c.call(ctx, request{method: http.MethodDelete, path: "/reservations/" + url.PathEscape(name)}, &r)
	return r, err
}
