package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/corral-sched/corral/internal/api"
)

// AddEndpoint adds a notification endpoint (POST /notify/endpoints). The
// answer carries its URL, secret or address: the only time they are
// shown.
func (c *Client) AddEndpoint(ctx context.Context, req api.EndpointRequest) (api.Endpoint, error) {
	var e api.Endpoint
	err := c.call(ctx, request{method: http.MethodPost, path: "/notify/endpoints", body: req}, &e)
	return e, err
}

// Endpoints lists the notification endpoints the caller manages, redacted
// (GET /notify/endpoints).
func (c *Client) Endpoints(ctx context.Context) (api.EndpointList, error) {
	var l api.EndpointList
	err := c.call(ctx, request{method: http.MethodGet, path: "/notify/endpoints"}, &l)
	return l, err
}

// RemoveEndpoint removes a notification endpoint (DELETE
// /notify/endpoints/{id}).
func (c *Client) RemoveEndpoint(ctx context.Context, id string) (api.Endpoint, error) {
	p, err := pathID("endpoint", id)
	if err != nil {
		return api.Endpoint{}, err
	}
	var e api.Endpoint
	err = c.call(ctx, request{method: http.MethodDelete, path: "/notify/endpoints/" + p}, &e)
	return e, err
}

// TestEndpoint sends a test notification now (POST
// /notify/endpoints/{id}/test); an error says why it was not delivered.
func (c *Client) TestEndpoint(ctx context.Context, id string) (api.EndpointTest, error) {
	p, err := pathID("endpoint", id)
	if err != nil {
		return api.EndpointTest{}, err
	}
	var t api.EndpointTest
	err = c.call(ctx, request{method: http.MethodPost, path: "/notify/endpoints/" + p + "/test"}, &t)
	return t, err
}

// NotificationFilter selects rows of the delivery log; zero fields match
// everything.
type NotificationFilter struct {
	State    string
	Endpoint string
	Limit    int
}

// Notifications reads the delivery log, newest first (GET
// /notifications).
func (c *Client) Notifications(ctx context.Context, f NotificationFilter) (api.NotificationList, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Endpoint != "" {
		q.Set("endpoint", f.Endpoint)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var l api.NotificationList
	err := c.call(ctx, request{method: http.MethodGet, path: "/notifications", query: q}, &l)
	return l, err
}

// NotifyDefaults reads a user's own notification defaults (GET
// /notify/defaults): the caller's, or with user set (admins) that user's.
func (c *Client) NotifyDefaults(ctx context.Context, user string) (api.NotifyDefaults, error) {
	var d api.NotifyDefaults
	err := c.call(ctx, request{method: http.MethodGet, path: "/notify/defaults", query: userQuery(user)}, &d)
	return d, err
}

// SetNotifyDefaults sets a user's own notification defaults (PUT
// /notify/defaults): notify in the grammar of a job's notify field, or
// api.NotifyDefault for the built-in ones; the caller's, or with user set
// (admins) that user's.
func (c *Client) SetNotifyDefaults(ctx context.Context, user, notify string) (api.NotifyDefaults, error) {
	var d api.NotifyDefaults
	err := c.call(ctx, request{method: http.MethodPut, path: "/notify/defaults", query: userQuery(user),
		body: api.NotifyDefaultsRequest{Notify: notify}}, &d)
	return d, err
}

func userQuery(user string) url.Values {
	if user == "" {
		return nil
	}
	return url.Values{"user": {user}}
}
