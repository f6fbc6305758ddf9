package api

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Notification classes a job's `notify` field chooses from (corral submit
// --notify). "all" and "none" stand alone.
const (
	NotifyBegin   = "begin"   // the job began running
	NotifyEnd     = "end"     // the job ended: completed, failed or canceled
	NotifyFail    = "fail"    // failures and warnings: failed, lost, time limit, dependency never satisfied
	NotifyPreempt = "preempt" // preempted and requeued; idle before an idle action
	NotifyAll     = "all"
	NotifyNone    = "none"
)

// ParseNotify checks and normalizes a job's notify value: a comma-separated
// list of begin, end, fail and preempt, or all, or none. The result is in
// that order, without repeats; "" stays "" (the user's defaults).
func ParseNotify(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	var got []string
	for _, p := range strings.Split(s, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		switch p {
		case NotifyBegin, NotifyEnd, NotifyFail, NotifyPreempt, NotifyAll, NotifyNone:
		default:
			return "", fmt.Errorf("%q is not a notification class; want a comma-separated list of begin, end, fail and preempt, or all, or none", truncateText(p, 40))
		}
		if !slices.Contains(got, p) {
			got = append(got, p)
		}
	}
	if (slices.Contains(got, NotifyAll) || slices.Contains(got, NotifyNone)) && len(got) > 1 {
		return "", fmt.Errorf("%q: all and none stand alone", truncateText(s, 60))
	}
	var out []string
	for _, c := range []string{NotifyBegin, NotifyEnd, NotifyFail, NotifyPreempt, NotifyAll, NotifyNone} {
		if slices.Contains(got, c) {
			out = append(out, c)
		}
	}
	return strings.Join(out, ","), nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Notification endpoint kinds.
const (
	EndpointSlack   = "slack"   // a Slack (or Mattermost) incoming webhook URL
	EndpointWebhook = "webhook" // a generic webhook: signed JSON POSTs
	EndpointEmail   = "email"   // an email address, through the server's --smtp
)

// Notification endpoint scopes: whose events an endpoint receives.
const (
	ScopeUser    = "user"    // one user's jobs
	ScopeProject = "project" // every job of one project
	ScopeCluster = "cluster" // admin alerts about the cluster
)

// EndpointRequest is the body of POST /notify/endpoints. Kind slack and
// webhook take URL (webhook also Secret); email takes Address. Scope
// defaults to user; a project endpoint names its Project.
type EndpointRequest struct {
	Kind    string `json:"kind"`
	URL     string `json:"url,omitempty"`
	Secret  string `json:"secret,omitempty"`
	Address string `json:"address,omitempty"`
	Scope   string `json:"scope,omitempty"`
	Project string `json:"project,omitempty"`
	User    string `json:"user,omitempty"` // scope user: whose (admins only; default: the caller)
}

// Endpoint is a notification endpoint as the API shows it. Target is a
// redacted form of its URL or address; the URL, secret and address
// themselves are shown once, in the answer to the POST that created it
// (URL, Secret, Address), and never again.
type Endpoint struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Scope     string    `json:"scope"`
	Owner     string    `json:"owner,omitempty"` // the user (scope user) or project (scope project)
	Target    string    `json:"target"`
	HasSecret bool      `json:"has_secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`

	URL     string `json:"url,omitempty"`
	Secret  string `json:"secret,omitempty"`
	Address string `json:"address,omitempty"`
}

// EndpointList is GET /notify/endpoints.
type EndpointList struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// EndpointTest is the answer of POST /notify/endpoints/{id}/test.
type EndpointTest struct {
	Delivered bool   `json:"delivered"`
	Error     string `json:"error,omitempty"`
}

// Notification is one row of GET /notifications: one event for one
// endpoint and how its delivery went.
type Notification struct {
	ID          int64      `json:"id"`
	EventID     string     `json:"event_id"`
	EndpointID  string     `json:"endpoint_id"`
	Kind        string     `json:"kind"`
	JobID       string     `json:"job_id,omitempty"`
	Summary     string     `json:"summary"`
	State       string     `json:"state"` // pending, delivered or failed
	Attempts    int        `json:"attempts"`
	CreatedAt   time.Time  `json:"created_at"`
	NextAt      *time.Time `json:"next_attempt_at,omitempty"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	Digest      string     `json:"digest,omitempty"` // the event_id of the digest it went out in
	LastError   string     `json:"last_error,omitempty"`
}

// NotificationList is GET /notifications.
type NotificationList struct {
	Notifications []Notification `json:"notifications"`
}

// NotifyDefault, as the notify of PUT /notify/defaults (corral notify
// defaults default), goes back to the built-in defaults.
const NotifyDefault = "default"

// NotifyDefaults is a user's own notification defaults (GET and PUT
// /notify/defaults): the classes told by the jobs of theirs that have no
// notify field of their own. Notify is normalized as ParseNotify does;
// Builtin (Notify empty) means the user has set none and the built-in
// defaults apply: fail and preempt, and end for jobs that ran longer than
// 10 minutes.
type NotifyDefaults struct {
	User      string     `json:"user"`
	Notify    string     `json:"notify"`
	Builtin   bool       `json:"builtin"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	UpdatedBy string     `json:"updated_by,omitempty"`
}

// NotifyDefaultsRequest is the body of PUT /notify/defaults: notify in the
// grammar of a job's notify field (begin,end,fail,preempt, all, none), or
// "default" for the built-in defaults.
type NotifyDefaultsRequest struct {
	Notify string `json:"notify"`
}
