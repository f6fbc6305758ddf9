package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/cmdkit"
)

// Signing in: corral login, corral logout, corral user add (docs/team.md,
// "Signing in"), and how a client command finds its server and token.

// target is the server a client command talks to and the token it
// presents, with where each came from (corral whoami says).
type target struct {
	server     string // one address, or several comma-separated
	serverFrom string // --server, CORRAL_SERVER, the config file's default_server, or default
	token      string
	tokenFrom  string // --token, CORRAL_TOKEN, the config file (its path), or none
}

// target resolves the server and token: --server, else $CORRAL_SERVER,
// else the config file's default server, else client.DefaultServer; the
// token of --token, else $CORRAL_TOKEN, else the one the config file keeps
// for that server.
func (c *cli) target() (target, error) {
	t := target{server: c.server, serverFrom: "--server"}
	if t.server == "" {
		t.server, t.serverFrom = os.Getenv("CORRAL_SERVER"), "CORRAL_SERVER"
	}
	cfg, cfgErr := client.LoadConfig()
	path, _ := client.ConfigPath()
	if t.server == "" && cfgErr == nil && cfg.DefaultServer != "" {
		t.server, t.serverFrom = cfg.DefaultServer, "default_server in "+path
	}
	if t.server == "" {
		t.serverFrom = "default"
	}
	bases, err := client.NormalizeServerURLs(t.server) // one, or several sharing a database
	if err != nil {
		return t, usagef("%s: %w", t.serverFrom, err)
	}
	t.server = strings.Join(bases, ",")
	t.token, t.tokenFrom = c.token, "--token"
	if t.token == "" {
		t.token, t.tokenFrom = os.Getenv("CORRAL_TOKEN"), "CORRAL_TOKEN"
	}
	for _, b := range bases {
		if t.token != "" {
			break
		}
		t.token, t.tokenFrom = client.TokenFor(b), path
	}
	if t.token == "" {
		t.tokenFrom = "none"
	}
	return t, nil
}

// loginSocketCandidates are where `corral login` looks for a login
// socket: --socket, else $CORRAL_LOGIN_SOCKET, else auth.LoginSocketPath
// and the sockets of the local servers the config file knows.
func loginSocketCandidates(flag string) []string {
	if flag != "" {
		return []string{flag}
	}
	if v := os.Getenv("CORRAL_LOGIN_SOCKET"); v != "" {
		return []string{v}
	}
	out := []string{auth.LoginSocketPath}
	if cfg, err := client.LoadConfig(); err == nil {
		for _, sc := range cfg.Servers {
			if sc.DataDir != "" {
				out = append(out, filepath.Join(sc.DataDir, "login.sock"))
			}
		}
	}
	return out
}

// localLoginSocket is the first login socket candidate that exists on
// this machine as a socket, "" when none does: a hint for whoever names
// the server of the machine they are on.
func localLoginSocket() string {
	for _, p := range loginSocketCandidates("") {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Type() == fs.ModeSocket {
			return p
		}
	}
	return ""
}

// noSocket reports whether err says nothing listens at a socket path.
func noSocket(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ENOTDIR)
}

// newLoginCmd is `corral login [SERVER] [--invite CODE]`.
func (c *cli) newLoginCmd() *cobra.Command {
	var invite, socket string
	cmd := &cobra.Command{
		Use:   "login [SERVER] [--invite CODE]",
		Short: "Sign in: get a token of your own and save it with the server as the default",
		Long: `corral login gets a token of your own and saves it in the client config file
($CORRAL_CONFIG, else ~/.config/corral/config.json, mode 0600), with the server
as the default server of later commands. No one hands you a secret:

  On a node (no SERVER, or with CORRAL_SERVER set): the server's (or agent's)
  login socket knows your Unix account from the kernel and signs you in as it
  ($CORRAL_LOGIN_SOCKET, else ` + auth.LoginSocketPath + `).

  From anywhere, with SERVER: open the page it prints, in the dashboard where
  you are signed in, and type the code; the CLI then gets a token of your
  account. Or redeem an invite an admin made with "corral user add":
  --invite CODE (once, before it expires).

Signing in again the same way replaces your previous token. "corral logout"
forgets (and revokes) it.`,
		Example: `  corral login                                      # on a node of the cluster
  corral login https://head:7450                    # from a laptop: approve in the dashboard
  corral login https://head:7450 --invite corral-invite-...`,
		Args: argsAtMost(1, "one server"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.output != outputTable && c.output != outputJSON {
				return usagef("--output %q: want table or json", c.output)
			}
			server := ""
			if len(args) == 1 {
				server = args[0]
			} else if c.server != "" {
				server = c.server
			} else {
				server = os.Getenv("CORRAL_SERVER")
			}
			if server != "" {
				u, err := client.NormalizeServerURL(server)
				if err != nil {
					return usagef("server: %v", err)
				}
				server = u
			}
			ctx := cmd.Context()
			host, _ := os.Hostname()
			req := api.LoginRequest{Client: host}
			var ans api.LoginAnswer
			var how string
			var err error
			switch {
			case invite != "":
				if server == "" {
					return usagef("--invite needs the server: corral login SERVER --invite CODE")
				}
				ans, err = client.New(server, client.WithUserAgent("corral-cli")).RedeemInvite(ctx, api.InviteRedeemRequest{Code: invite, LoginRequest: req})
				how = "invite"
			case len(args) == 0 || socket != "":
				ans, how, err = c.socketLogin(ctx, socket, req)
				if err != nil && how == "" && server != "" {
					// No login socket here: sign in through the dashboard.
					ans, err = c.deviceLogin(ctx, server, req)
					how = "dashboard"
				}
			default:
				if p := localLoginSocket(); p != "" {
					fmt.Fprintf(c.stderr, "A login socket is on this machine (%s): if it serves %s, \"corral login\" without the server signs you in at once, without the dashboard.\n", p, server)
				}
				ans, err = c.deviceLogin(ctx, server, req)
				how = "dashboard"
			}
			if err != nil {
				return err
			}
			if server == "" {
				server = ans.Server
			}
			if server == "" {
				server = client.DefaultServer
			}
			path, err := client.SaveLogin(server, ans.Secret, true)
			if err != nil {
				// Signing in again the same way replaces this token.
				return fmt.Errorf("signed in as %s, but the token could not be saved: %w; "+
					"set CORRAL_CONFIG to a file you may write (or HOME to your home), then run corral login again", ans.User, err)
			}
			out := loginResult{Server: server, User: ans.User, Role: ans.Role, TokenID: ans.ID, ExpiresAt: ans.ExpiresAt, Via: how, Config: path}
			return c.emit(out, func(w io.Writer) error {
				fmt.Fprintf(w, "signed in to %s as %s (%s) through %s; token %s", server, ans.User, ans.Role, how, ans.ID)
				if ans.ExpiresAt != nil {
					fmt.Fprintf(w, ", expires %s", ans.ExpiresAt.Local().Format("2006-01-02 15:04"))
				}
				fmt.Fprintf(w, "\nsaved in %s with %s as the default server\n", path, server)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&invite, "invite", "", "redeem this invite code (from corral user add) for a token")
	cmd.Flags().StringVar(&socket, "socket", "", "the login socket to use (default $CORRAL_LOGIN_SOCKET, else "+auth.LoginSocketPath+")")
	return cmd
}

// loginResult is what corral login -o json prints (never the secret).
type loginResult struct {
	Server    string     `json:"server"`
	User      string     `json:"user"`
	Role      api.Role   `json:"role"`
	TokenID   string     `json:"token_id"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Via       string     `json:"via"` // socket, dashboard or invite
	Config    string     `json:"config"`
}

// socketLogin signs in through the first login socket that answers; how
// is "" when none does (err says where it looked).
func (c *cli) socketLogin(ctx context.Context, flag string, req api.LoginRequest) (api.LoginAnswer, string, error) {
	var tried []string
	for _, p := range loginSocketCandidates(flag) {
		ans, err := client.SocketLogin(ctx, p, req)
		if err == nil {
			return ans, "the login socket " + p, nil
		}
		var ae *api.Error
		if errors.As(err, &ae) || !noSocket(err) {
			return ans, "the login socket " + p, fmt.Errorf("the login socket %s: %w", p, err)
		}
		tried = append(tried, p)
	}
	return api.LoginAnswer{}, "", fmt.Errorf("no login socket answers on this machine (tried %s); name the server to sign in through its dashboard: corral login https://HOST:7450", strings.Join(tried, ", "))
}

// deviceLogin is the device flow: it prints the page and the code, and
// polls until the code is approved, refused or expired.
func (c *cli) deviceLogin(ctx context.Context, server string, req api.LoginRequest) (api.LoginAnswer, error) {
	cl := client.New(server, client.WithUserAgent("corral-cli"))
	d, err := cl.StartDevice(ctx)
	if err != nil {
		return api.LoginAnswer{}, err
	}
	fmt.Fprintf(c.stderr, "To sign in, open %s (signed in to the dashboard) and type the code\n\n    %s\n\nWaiting for approval (the code expires in %s)...\n",
		d.VerificationURI, d.UserCode, time.Duration(d.ExpiresIn)*time.Second)
	interval := max(time.Duration(d.Interval)*time.Second, time.Second)
	deadline := time.Now().Add(time.Duration(d.ExpiresIn) * time.Second)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return api.LoginAnswer{}, ctx.Err()
		case <-t.C:
		}
		ans, err := cl.DeviceToken(ctx, api.DeviceTokenRequest{DeviceCode: d.DeviceCode, LoginRequest: req})
		var ae *api.Error
		switch {
		case err == nil:
			return ans, nil
		case errors.As(err, &ae) && ae.Code == "authorization_pending" && time.Now().Before(deadline):
			continue
		case errors.Is(err, client.ErrUnreachable) && time.Now().Before(deadline):
			continue // a restart or a fail-over: the code may still be good
		}
		return api.LoginAnswer{}, err
	}
}

// newLogoutCmd is `corral logout [SERVER]`.
func (c *cli) newLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout [SERVER]",
		Short: "Revoke the token saved for a server (default: the default server) and forget it",
		Args:  argsAtMost(1, "one server"),
		RunE: func(cmd *cobra.Command, args []string) error {
			server := ""
			if len(args) == 1 {
				server = args[0]
			} else {
				t, err := c.target()
				if err != nil {
					return err
				}
				server = strings.Split(t.server, ",")[0]
			}
			base, err := client.NormalizeServerURL(server)
			if err != nil {
				return usagef("server: %v", err)
			}
			token := client.TokenFor(base)
			if token == "" {
				return fmt.Errorf("no token is saved for %s; nothing to log out of", base)
			}
			note := "revoked"
			if _, err := client.New(base, client.WithToken(token), client.WithUserAgent("corral-cli")).Logout(cmd.Context()); err != nil {
				var ae *api.Error
				switch {
				case errors.As(err, &ae) && ae.Status == 401:
					note = "already not valid"
				case errors.As(err, &ae) && ae.Code == "bootstrap_token":
					note = "not revoked (the bootstrap admin token; corral token revoke " + auth.BootstrapID + " revokes it)"
				default:
					note = "not revoked (" + describe(err) + "); an admin can revoke it with corral token revoke"
				}
			}
			path, _, err := client.ForgetToken(base)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.stdout, "logged out of %s: the token is %s and forgotten (%s)\n", base, note, path)
			return err
		},
	}
}

// newUserCmd is `corral user add NAME`: an invite (admin).
func (c *cli) newUserCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Invite users (admin)",
	}
	var req api.InviteRequest
	var role, expires string
	add := &cobra.Command{
		Use:   "add NAME [--project P]... [--role user] [--expires 7d]",
		Short: "Make a single-use, expiring invite that signs NAME in (corral login SERVER --invite CODE)",
		Example: `  corral user add ana --project vision
  corral user add bo --role viewer --expires 2d`,
		Args: argsExactly(1, "the user's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.User = args[0]
			req.Role = api.Role(role)
			if !req.Role.Valid() {
				return usagef("--role %q: want admin, user or viewer", role)
			}
			if expires != "" {
				d, err := parseDays(expires)
				if err != nil || d <= 0 {
					return usagef("--expires %q: want a duration such as 7d or 48h", expires)
				}
				req.ExpiresIn = rawString(d.String())
			}
			t, err := c.target()
			if err != nil {
				return err
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Invite, error) {
				return cl.CreateInvite(ctx, req)
			}, func(w io.Writer, inv api.Invite) error {
				fmt.Fprintf(w, "invite %s for %s (%s)", inv.ID, inv.User, inv.Role)
				if len(inv.Projects) > 0 {
					fmt.Fprintf(w, ", projects %s", strings.Join(inv.Projects, ", "))
				}
				fmt.Fprintf(w, ", single use, expires %s\n\n  %s login %s --invite %s\n\nThis is the only time the code is shown; give that line to %s.\n",
					inv.ExpiresAt.Local().Format("2006-01-02 15:04"), cmdkit.SelfName(), strings.Split(t.server, ",")[0], inv.Code, inv.User)
				return nil
			})
		},
	}
	fl := add.Flags()
	fl.StringVar(&role, "role", string(api.RoleUser), "admin, user or viewer")
	fl.StringArrayVar(&req.Projects, "project", nil, "a project the user's token may submit to (repeatable; none: any; the first is the default)")
	fl.StringArrayVar(&req.ProjectAdmin, "project-admin", nil, "a project whose every job the user may cancel and re-prioritise (repeatable)")
	fl.StringVar(&expires, "expires", "", "the invite may be redeemed for this long, e.g. 7d or 48h (default 7d)")
	cmd.AddCommand(add)
	return cmd
}

// parseDays parses a duration that may be in days (7d), else Go's (48h).
func parseDays(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 || n > 100*365 {
			return 0, fmt.Errorf("%q: want a number of days (7d) or a duration (48h)", v)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	return time.ParseDuration(v)
}
