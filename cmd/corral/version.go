package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/cmdkit"
)

// version is this binary's version.
const version = cmdkit.Version

// versionInfo is what corral version prints: this binary's version and
// build, and the server's version when one answers.
type versionInfo struct {
	Client      string `json:"client"`
	Commit      string `json:"commit,omitempty"`
	Modified    bool   `json:"modified,omitempty"`
	Go          string `json:"go"`
	Server      string `json:"server,omitempty"`
	ServerURL   string `json:"server_url,omitempty"`
	ServerError string `json:"server_error,omitempty"`
}

// buildVersion is this binary's version and the commit it was built from
// (when the build recorded one: go build in a git checkout does).
func buildVersion() versionInfo {
	v := versionInfo{Client: version, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

// String is the one-line form of the client's version.
func (v versionInfo) clientLine() string {
	s := "corral " + v.Client
	if v.Commit != "" {
		c := v.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (" + c
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + v.Go
}

func (c *cli) newVersionCmd() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this corral and of its server",
		Long: `Print this corral's version (and the commit it was built from), then the
version of the server it talks to ($CORRAL_SERVER or --server), if one
answers. --client prints only the first. "corral --version" is the same.`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.printVersion(cmd.Context(), clientOnly)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only this binary's version; ask no server")
	return cmd
}

// printVersion prints the client's version and, unless clientOnly, the
// server's. A server that cannot be reached is said, not an error: the
// client's version is still worth having.
func (c *cli) printVersion(ctx context.Context, clientOnly bool) error {
	v := buildVersion()
	if !clientOnly {
		if cl, err := c.client(); err != nil {
			v.ServerError = err.Error()
		} else {
			v.ServerURL = cl.BaseURL()
			cctx, cancel := context.WithTimeout(ctx, client.DefaultTimeout)
			st, err := cl.OrchestratorStatus(cctx)
			cancel()
			if err != nil {
				v.ServerError = describe(err)
			} else {
				v.Server = st.Version
			}
		}
	}
	if c.output == outputJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fmt.Fprintf(c.stdout, "client: %s\n", v.clientLine())
	switch {
	case clientOnly:
	case v.ServerError != "":
		fmt.Fprintf(c.stdout, "server: unknown (%s)\n", v.ServerError)
	default:
		fmt.Fprintf(c.stdout, "server: corral %s at %s\n", v.Server, v.ServerURL)
	}
	return nil
}
