package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// newNotifyCmd is `corral notify add|list|remove|test|log|defaults`
// (docs/notifications.md).
func (c *cli) newNotifyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Manage where notifications go: Slack, webhooks, email",
		Long: `Corral tells you when your jobs begin, end, fail or are preempted, through
endpoints you add: Slack (or Mattermost) incoming webhooks, generic webhooks
(signed JSON POSTs) and email (when the server has --smtp).

By default a job tells of failures and preemptions, and of its end when it
ran over 10 minutes; corral notify defaults sets your own defaults, and
corral submit --notify changes them per job. An endpoint
is yours (--scope user), a project's (--scope project --project P; its
project admins manage it) or the cluster's (--scope cluster: admin alerts;
admins only). A URL, secret or address is shown once, when it is added; lists
show a redacted form.`,
	}
	var req api.EndpointRequest
	add := &cobra.Command{
		Use:   "add slack|webhook|email URL|ADDRESS",
		Short: "Add an endpoint (its URL or secret is shown this once)",
		Example: `  corral notify add slack https://hooks.slack.com/services/T000/B000/XXXX
  corral notify add webhook https://ci.example.com/corral --secret "$(openssl rand -hex 16)"
  corral notify add email ana@example.com
  corral notify add slack https://hooks.slack.com/services/... --scope project --project nlp
  corral notify add webhook https://ops.example.com/alerts --secret S --scope cluster`,
		Args: argsExactly(2, "the kind (slack, webhook or email) and its URL or address"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := req
			r.Kind = args[0]
			switch r.Kind {
			case api.EndpointSlack, api.EndpointWebhook:
				r.URL = args[1]
			case api.EndpointEmail:
				r.Address = args[1]
			default:
				return usagef("%q: want slack, webhook or email", args[0])
			}
			if r.Kind == api.EndpointWebhook && r.Secret == "" {
				return usagef("a webhook needs --secret: its body is signed with it (X-Corral-Signature)")
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Endpoint, error) {
				return cl.AddEndpoint(ctx, r)
			}, func(w io.Writer, e api.Endpoint) error {
				fmt.Fprintf(w, "endpoint %s: %s for %s\n", e.ID, e.Kind, scopeText(e))
				fmt.Fprintf(w, "  target: %s (lists show it redacted: %s)\n", e.URL+e.Address, e.Target)
				if e.Secret != "" {
					fmt.Fprintf(w, "  secret: %s\n", e.Secret)
				}
				fmt.Fprintf(w, "Check it with: corral notify test %s\n", e.ID)
				return nil
			})
		},
	}
	fl := add.Flags()
	fl.StringVar(&req.Secret, "secret", "", "webhook only: the HMAC-SHA256 key of the X-Corral-Signature header (8 to 256 characters)")
	fl.StringVar(&req.Scope, "scope", api.ScopeUser, "whose events: user (yours), project (--project's jobs; project admins) or cluster (admin alerts; admins)")
	fl.StringVar(&req.Project, "project", "", "with --scope project: the project")
	fl.StringVar(&req.User, "user", "", "with --scope user: whose endpoint (admins only; default: yours)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the endpoints you manage (redacted)",
		Args:  argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.EndpointList, error) {
				return cl.Endpoints(ctx)
			}, func(w io.Writer, l api.EndpointList) error {
				now := c.now()
				t := newTable(w, "ID", "KIND", "FOR", "TARGET", "CREATED", "BY")
				for _, e := range l.Endpoints {
					t.row(e.ID, e.Kind, scopeText(e), e.Target, fmtTime(e.CreatedAt, now), e.CreatedBy)
				}
				return t.flush()
			})
		},
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove an endpoint; what it had not been sent yet is dropped",
		Args:  argsExactly(1, "the endpoint's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Endpoint, error) {
				return cl.RemoveEndpoint(ctx, args[0])
			}, func(w io.Writer, e api.Endpoint) error {
				_, err := fmt.Fprintf(w, "endpoint %s removed\n", e.ID)
				return err
			})
		},
	}
	test := &cobra.Command{
		Use:   "test ID",
		Short: "Send a test notification now; fails when it is not delivered",
		Args:  argsExactly(1, "the endpoint's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.EndpointTest, error) {
				return cl.TestEndpoint(ctx, args[0])
			}, func(w io.Writer, _ api.EndpointTest) error {
				_, err := fmt.Fprintf(w, "test notification delivered to %s\n", args[0])
				return err
			})
		},
	}
	var f client.NotificationFilter
	log := &cobra.Command{
		Use:   "log",
		Short: "Show notifications and how their delivery went, newest first",
		Args:  argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch f.State {
			case "", "pending", "delivered", "failed":
			default:
				return usagef("--state %q: want pending, delivered or failed", f.State)
			}
			if f.Limit < 1 || f.Limit > 1000 {
				return usagef("--limit %d: want 1 to 1000", f.Limit)
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.NotificationList, error) {
				return cl.Notifications(ctx, f)
			}, func(w io.Writer, l api.NotificationList) error {
				now := c.now()
				t := newTable(w, "EVENT", "ENDPOINT", "STATE", "TRIES", "CREATED", "DIGEST", "SUMMARY", "ERROR")
				for _, n := range l.Notifications {
					state := n.State
					if n.NextAt != nil {
						state += " (next " + fmtTime(*n.NextAt, now) + ")"
					}
					t.row(n.EventID, n.EndpointID, state, strconv.Itoa(n.Attempts), fmtTime(n.CreatedAt, now), n.Digest, clip(n.Summary, 70), clip(n.LastError, 50))
				}
				return t.flush()
			})
		},
	}
	lf := log.Flags()
	lf.StringVar(&f.State, "state", "", "only pending, delivered or failed notifications")
	lf.StringVar(&f.Endpoint, "endpoint", "", "only this endpoint's")
	lf.IntVar(&f.Limit, "limit", 50, "at most this many (1 to 1000)")
	cmd.AddCommand(add, list, remove, test, log, c.newNotifyDefaultsCmd())
	return cmd
}

// scopeText says whose events an endpoint gets.
func scopeText(e api.Endpoint) string {
	switch e.Scope {
	case api.ScopeProject:
		return "project " + e.Owner
	case api.ScopeCluster:
		return "the cluster (admin alerts)"
	}
	return "user " + e.Owner
}

// notifyText is a job's notification choice as corral show prints it.
func notifyText(j api.Job) string {
	s := j.Notify
	if s == "" {
		s = "its user's defaults (corral notify defaults; built-in: fail, preempt; end after 10m)"
	}
	if j.NotifyTasks {
		s += "; every array task"
	}
	return s
}
