package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/timespec"
)

// newTokenCmd is `corral token create|list|revoke` (admin tokens only)
// and `corral token show` (anyone: the token this CLI sends).
func (c *cli) newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens (admin); show the one you use",
		Long: `Tokens identify callers of the API. Each carries a user and a role:
viewer (reads everything), user (also submits jobs and acts on its own jobs and
holds, and on every job of the projects it administers) or admin (everything:
policies, quotas, nodes, tokens, the audit trail, other users' jobs).

A token's secret is shown once, when it is made; the server keeps only its
hash. Give it to its user, who sets CORRAL_TOKEN (or passes --token), or
let people sign themselves in with "corral login" instead.

"corral token show" prints the token this CLI sends, for clients that do
not read its config file: export CORRAL_TOKEN=$(corral token show).`,
	}
	var req api.TokenRequest
	var role, expires string
	create := &cobra.Command{
		Use:   "create --user NAME [--role admin|user|viewer] [--project P]...",
		Short: "Make a token and print its secret (shown once)",
		Example: `  corral token create --user ana
  corral token create --user bob --project vision --project-admin vision
  corral token create --user grafana --role viewer --expires 720h`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.User == "" {
				return usagef("--user is required")
			}
			req.Role = api.Role(role)
			if !req.Role.Valid() {
				return usagef("--role %q: want admin, user or viewer", role)
			}
			if expires != "" {
				d, err := normDuration("--expires", expires) // durflag.go: 30d too
				if err != nil {
					return err
				}
				req.ExpiresIn = rawString(d)
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.NewToken, error) {
				return cl.CreateToken(ctx, req)
			}, func(w io.Writer, t api.NewToken) error {
				fmt.Fprintf(w, "token %s for %s (%s)", t.ID, t.User, t.Role)
				if len(t.Projects) > 0 {
					fmt.Fprintf(w, ", projects %s", strings.Join(t.Projects, ", "))
				}
				if len(t.ProjectAdmin) > 0 {
					fmt.Fprintf(w, ", admin of %s", strings.Join(t.ProjectAdmin, ", "))
				}
				fmt.Fprintf(w, "\n\n  %s\n\nThis is the only time the secret is shown. Its user sets CORRAL_TOKEN=<it>.\n", t.Secret)
				return nil
			})
		},
	}
	fl := create.Flags()
	fl.StringVar(&req.User, "user", "", "the user the token acts as (jobs it submits are theirs)")
	fl.StringVar(&role, "role", string(api.RoleUser), "admin, user or viewer")
	fl.StringArrayVar(&req.Projects, "project", nil, "a project the token may submit to (repeatable; none: any; the first is the default)")
	fl.StringArrayVar(&req.ProjectAdmin, "project-admin", nil, "a project whose every job the token may cancel and re-prioritise (repeatable)")
	fl.StringVar(&req.Description, "description", "", "what the token is for")
	fl.StringVar(&expires, "expires", "", "the token stops working this long from now, e.g. 720h (default: never)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.TokenList, error) {
				return cl.Tokens(ctx)
			}, func(w io.Writer, l api.TokenList) error {
				now := c.now()
				t := newTable(w, "ID", "USER", "ROLE", "PROJECTS", "CREATED", "STATUS", "DESCRIPTION")
				for _, tk := range l.Tokens {
					status := "active"
					switch {
					case tk.RevokedAt != nil:
						status = "revoked " + fmtTime(*tk.RevokedAt, now)
					case tk.ExpiresAt != nil && !now.Before(*tk.ExpiresAt):
						status = "expired"
					case tk.ExpiresAt != nil:
						status = "expires " + fmtTime(*tk.ExpiresAt, now)
					}
					projects := strings.Join(tk.Projects, ",")
					if len(tk.ProjectAdmin) > 0 {
						projects += " admin:" + strings.Join(tk.ProjectAdmin, ",")
					}
					t.row(tk.ID, tk.User, string(tk.Role), projects, fmtTime(tk.CreatedAt, now), status, clip(tk.Description, 40))
				}
				return t.flush()
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: it stops working at once",
		Args:  argsExactly(1, "the token id (see corral token list)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Token, error) {
				return cl.RevokeToken(ctx, args[0])
			}, func(w io.Writer, t api.Token) error {
				_, err := fmt.Fprintf(w, "revoked token %s of %s\n", t.ID, t.User)
				return err
			})
		},
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the token this CLI sends (yours, from corral login), for other clients",
		Long: `Print the token this CLI sends to the server: --token, else $CORRAL_TOKEN,
else the one "corral login" (or "corral up") saved for the server in the
client config file. For clients that do not read that file (the TypeScript
client, curl, the dashboard's sign-in): export CORRAL_TOKEN=$(corral token show).
It asks the server nothing; "corral whoami" says whose token it is.`,
		Example: `  export CORRAL_TOKEN=$(corral token show)
  curl -H "Authorization: Bearer $(corral token show)" http://127.0.0.1:7450/openapi.json`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := c.target() // login.go
			if err != nil {
				return err
			}
			if t.token == "" {
				return exitCodeError{code: exitError, msg: fmt.Sprintf(
					"no token for %s: sign in with corral login (or set CORRAL_TOKEN)", t.server)}
			}
			out := tokenShowResult{Server: t.server, Token: t.token, TokenSource: t.tokenFrom}
			return c.emit(out, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, t.token)
				return err
			})
		},
	}
	cmd.AddCommand(create, list, revoke, show)
	return cmd
}

// newWhoamiCmd is `corral whoami`: the server, the token's user and role,
// and where the token came from.
func (c *cli) newWhoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show the server, and the user, role and source of the token in use",
		Args:  argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := c.target() // login.go
			if err != nil {
				return err
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (whoamiResult, error) {
				me, err := cl.Whoami(ctx)
				if err != nil {
					return whoamiResult{}, err
				}
				return whoamiResult{Whoami: me, Server: cl.BaseURL(), ServerSource: t.serverFrom, TokenSource: t.tokenFrom}, nil
			}, func(w io.Writer, out whoamiResult) error {
				me := out.Whoami
				fmt.Fprintf(w, "%s (%s, token %s)\n", me.User, me.Role, me.TokenID)
				fmt.Fprintf(w, "server: %s (from %s)\n", out.Server, out.ServerSource)
				fmt.Fprintf(w, "token from: %s\n", out.TokenSource)
				if len(me.Projects) > 0 {
					fmt.Fprintf(w, "projects: %s\n", strings.Join(me.Projects, ", "))
				}
				if len(me.ProjectAdmin) > 0 {
					fmt.Fprintf(w, "admin of: %s\n", strings.Join(me.ProjectAdmin, ", "))
				}
				return nil
			})
		},
	}
}

// tokenShowResult is what corral token show -o json prints.
type tokenShowResult struct {
	Server      string `json:"server"`
	Token       string `json:"token"`
	TokenSource string `json:"token_source"` // --token, CORRAL_TOKEN or the config file's path
}

// whoamiResult is what corral whoami -o json prints: GET /auth/whoami's
// answer, the server, and where the server and token came from.
type whoamiResult struct {
	api.Whoami
	Server       string `json:"server"`
	ServerSource string `json:"server_source"` // --server, CORRAL_SERVER, default_server in PATH, or default
	TokenSource  string `json:"token_source"`  // --token, CORRAL_TOKEN, the config file's path, or none
}

// newAuditCmd is `corral audit`: the audit trail (admin tokens only).
func (c *cli) newAuditCmd() *cobra.Command {
	var f client.AuditFilter
	var since string
	cmd := &cobra.Command{
		Use:   "audit [--user U] [--action A] [--since 24h] [--limit N]",
		Short: "Show the audit trail: every call that changed something, newest first (admin)",
		Long: `Every call that changes something (or tried to) is recorded: who (user, role,
token), what (action, path, target), when, from where (the caller's address)
and the answer's status. The trail is kept in the store, across restarts.
Actions: job.submit, job.cancel, job.priority, hold.create, hold.release,
node.cordon|drain|uncordon, orchestrator.start|stop, policy.set,
token.create, token.revoke, session.create, session.delete, agent.register,
login.socket, login.device, login.device.start, login.device.approve,
invite.create, login.invite, login.node, login.logout.
--action job. matches every job action.`,
		Example: `  corral audit --since 24h
  corral audit --user ana --action job.cancel`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since != "" {
				d, err := timespec.Duration(since)
				if err != nil {
					t, err2 := time.Parse(time.RFC3339, since)
					if err2 != nil {
						return usagef("--since %q: want a duration such as 24h or an RFC 3339 time", since)
					}
					f.Since = t
				} else {
					f.Since = c.now().Add(-d)
				}
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.AuditList, error) {
				return cl.Audit(ctx, f)
			}, func(w io.Writer, l api.AuditList) error {
				now := c.now()
				t := newTable(w, "TIME", "USER", "ROLE", "ACTION", "TARGET", "STATUS", "FROM")
				for _, e := range l.Entries {
					status := strconv.Itoa(e.Status)
					if e.Error != "" {
						status += " " + e.Error
					}
					who := e.User
					if who == "" {
						who = "-"
					}
					t.row(fmtTimeFull(e.At, now), who, string(e.Role), e.Action, clip(e.Target, 40), status, e.Remote)
				}
				return t.flush()
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.User, "user", "", "only this user's calls")
	fl.StringVar(&f.Action, "action", "", "only this action (job. for every job action)")
	fl.StringVar(&since, "since", "", "only calls since this long ago (24h) or this time (RFC 3339)")
	fl.IntVar(&f.Limit, "limit", 100, "at most this many entries")
	return cmd
}
