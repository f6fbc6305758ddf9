package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// notebookPoll is how often corral notebook looks at its job while it
// waits for the notebook to answer.
const notebookPoll = 500 * time.Millisecond

// notebookStarted is what corral notebook -o json prints.
type notebookStarted struct {
	Job api.Job `json:"job"`
	URL string  `json:"url"`
}

func (c *cli) newNotebookCmd() *cobra.Command {
	var f submitFlags
	var command string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "notebook [--gpus N] [--cmd 'jupyter lab'] [submit flags]",
		Short: "Start a notebook server on GPUs as an interactive job and print its URL",
		Long: `Submit an interactive job (class interactive) that runs a notebook server
on the job's node, wait until it answers, and print its address through the
Corral server: SERVER/proxy/JOB/. Only the job's owner may open it, with a
token (Authorization: Bearer) or the dashboard's sign-in; nobody needs an
SSH tunnel.

The server listens on 127.0.0.1, on the port in $CORRAL_NOTEBOOK_PORT, and
serves under the path /proxy/$CORRAL_JOB_ID/. When --cmd is Jupyter's
(jupyter lab, jupyter notebook, jupyter server, jupyter-lab and the like),
corral adds --port, --ip=127.0.0.1, --no-browser, and base_url and
allow_remote_access=True (ServerApp's and NotebookApp's) to its command
line, and gives it the
job's secret as $JUPYTER_TOKEN: the proxy presents that secret, so you never
type a Jupyter token, and other accounts on the node cannot use the port.

Ctrl-C while it waits cancels the job. Once the URL is printed, the job
ends with corral cancel JOB, at its time limit, or when the server exits.`,
		Example: `  corral notebook --gpus 1
  corral notebook --gpus 2 --time-limit 4h --cmd 'jupyter lab --notebook-dir ~/work'
  corral notebook --cmd 'python -m myapp --port $CORRAL_NOTEBOOK_PORT'`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.array != "" {
				return usagef("a notebook is one job; --array does not apply")
			}
			if f.nodes > 1 {
				return usagef("a notebook runs on one node; --nodes must be 1")
			}
			if strings.TrimSpace(command) == "" {
				return usagef("--cmd is empty; give the notebook's command, e.g. --cmd 'jupyter lab'")
			}
			req, err := f.request(cmd, []string{notebookCommand(command)})
			if err != nil {
				return err
			}
			req.Notebook, req.Class = true, api.ClassInteractive
			cl, err := c.client()
			if err != nil {
				return err
			}
			job, err := cl.Submit(cmd.Context(), req, f.idempotencyKey)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "corral: notebook job %s %s; corral cancel %s ends it\n", job.ID, job.State, job.ID)
			url := cl.NotebookURL(job.ID)
			if !noWait {
				if job, url, err = c.notebookWaitOrCancel(cmd.Context(), cl, job.ID); err != nil {
					return err
				}
			}
			out := notebookStarted{Job: job, URL: url}
			return c.emit(out, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, out.URL)
				return err
			})
		},
	}
	f.register(cmd)
	_ = cmd.Flags().MarkHidden("array") // a notebook is one job
	cmd.Flags().StringVar(&command, "cmd", "jupyter lab", "the notebook server's command, run with /bin/sh -c; it must listen on 127.0.0.1:$CORRAL_NOTEBOOK_PORT (Jupyter's own flags are added for it)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "print the URL at once, without waiting for the notebook to answer")
	return cmd
}

// notebookWaitOrCancel is notebookWait, but Ctrl-C while it waits
// cancels the job (as salloc gives up its pending allocation) and exits
// 130.
func (c *cli) notebookWaitOrCancel(ctx context.Context, cl *client.Client, id string) (api.Job, string, error) {
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	job, url, err := c.notebookWait(sigCtx, cl, id)
	if err == nil || sigCtx.Err() == nil || ctx.Err() != nil {
		return job, url, err
	}
	cctx, cancel := context.WithTimeout(ctx, client.DefaultTimeout)
	defer cancel()
	if _, cerr := cl.Cancel(cctx, id, 0); cerr != nil {
		return job, "", fmt.Errorf("interrupted; canceling notebook job %s: %w", id, cerr)
	}
	return job, "", exitCodeError{code: exitCanceled, msg: fmt.Sprintf("interrupted: notebook job %s canceled", id)}
}

// notebookWait waits until the job's notebook answers through the proxy,
// saying on stderr when the job's state changes, and returns its URL
// (under the server's --public-url when it has one, else under the
// address this CLI uses); it fails when the job ends first.
func (c *cli) notebookWait(ctx context.Context, cl *client.Client, id string) (api.Job, string, error) {
	var said api.State
	saidStatus := 0
	for {
		job, err := cl.Job(ctx, id)
		if err != nil {
			return job, "", err
		}
		if job.State.Terminal() {
			return job, "", fmt.Errorf("notebook job %s ended (%s) before its notebook answered: %s; see corral logs %s", id, job.State, job.Message, id)
		}
		if job.State != said {
			said = job.State
			detail := string(job.State)
			if job.PendingMessage != "" {
				detail += ": " + job.PendingMessage
			}
			fmt.Fprintf(c.stderr, "corral: waiting for the notebook of job %s (%s)\n", id, detail)
		}
		if job.State == api.StateRunning {
			p, err := cl.NotebookAnswers(ctx, id)
			if err != nil {
				return job, "", err
			}
			if p.Ready && p.PublicURL != "" {
				return job, p.PublicURL, nil
			}
			if p.Ready {
				return job, cl.NotebookURL(id), nil
			}
			// It listens but does not serve under the proxy's prefix
			// (yet): say so once, then keep waiting.
			if p.Status >= 400 && p.Status != saidStatus {
				saidStatus = p.Status
				fmt.Fprintf(c.stderr, "corral: the notebook of job %s answers %d under %s: still waiting (it must serve under that path: see docs/interactive.md)\n",
					id, p.Status, api.NotebookPath(id))
			}
		}
		select {
		case <-ctx.Done():
			return job, "", ctx.Err()
		case <-time.After(notebookPoll):
		}
	}
}

// notebookCommand is the job's command for the notebook command cmd: a
// Jupyter command gets the flags that put it behind the proxy; any other
// runs as given (it reads $CORRAL_NOTEBOOK_PORT itself).
func notebookCommand(cmd string) string {
	if !isJupyter(cmd) {
		return cmd
	}
	return `JUPYTER_TOKEN="$` + api.NotebookTokenVar + `" exec ` + cmd +
		` --port="$` + api.NotebookPortVar + `" --ip=127.0.0.1 --no-browser` +
		` --ServerApp.base_url="/proxy/$CORRAL_JOB_ID/" --ServerApp.allow_remote_access=True` +
		// The same for the classic Notebook (6.x), which ignores ServerApp's.
		` --NotebookApp.base_url="/proxy/$CORRAL_JOB_ID/" --NotebookApp.allow_remote_access=True`
}

// isJupyter reports whether cmd starts Jupyter's server: jupyter lab,
// jupyter notebook, jupyter server, jupyter-lab, jupyter-notebook or
// jupyter-server (any path).
func isJupyter(cmd string) bool {
	words := strings.Fields(cmd)
	if len(words) == 0 {
		return false
	}
	switch path.Base(words[0]) {
	case "jupyter-lab", "jupyter-notebook", "jupyter-server":
		return true
	case "jupyter":
		return len(words) > 1 && (words[1] == "lab" || words[1] == "notebook" || words[1] == "server")
	}
	return false
}
