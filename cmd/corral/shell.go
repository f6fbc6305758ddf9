package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/shellproto"
)

func (c *cli) newShellCmd() *cobra.Command {
	var rank int
	cmd := &cobra.Command{
		Use:   "shell JOB [--rank N] [-- CMD [ARG...]]",
		Short: "Open a shell (or run CMD) inside a running job, like kubectl exec -it",
		Long: `Open a shell inside a running job, on the node that runs it (rank N's node
for a multi-node gang; default rank 0), as kubectl exec -it or srun --pty
--overlap do: in the job's environment (CUDA_VISIBLE_DEVICES, CORRAL_*, its
env), its workdir, its cgroup and its Unix account. The session goes through
the Corral server, so no SSH to the node is needed.

With a terminal on stdin, the remote command gets a PTY: the window size
follows yours, and Ctrl-C, Ctrl-Z and the like go to the remote command.
Without one (a script, a pipe), CMD runs without a PTY and its stdout and
stderr stream back apart. corral shell exits with the remote command's exit
code. Only the job's owner, its project's admins and admins may attach;
every attach is audited (job.shell). When the job ends, the shell is told
and closed.`,
		Example: `  corral shell 01JABC...                    # an interactive shell in the job
  corral shell 01JABC... -- nvidia-smi      # one command; its exit code is corral's
  corral shell 01JABC... --rank 1 -- sh -c 'echo $CUDA_VISIBLE_DEVICES'`,
		Args: argsAtLeast(1, "the job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rank < 0 {
				return usagef("--rank %d: must be 0 or more", rank)
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			argv := args[1:]
			if dash := cmd.ArgsLenAtDash(); dash > 1 {
				return usagef("corral shell takes one job; put the command after --")
			}
			code, err := c.runShell(cmd.Context(), cl, args[0], rank, argv, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if code != exitOK {
				return exitCodeError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&rank, "rank", 0, "the gang rank whose node runs the shell")
	return cmd
}

// commandArgs drops the "--" that separates a command from corral's own
// arguments (flag parsing stops at the first argument, which keeps it).
func commandArgs(args []string) []string {
	if len(args) > 0 && args[0] == "--" {
		return args[1:]
	}
	return args
}

// runShell runs a shell session in job id and returns the remote
// command's exit code. With a terminal on stdin, that terminal is raw for
// the session and its size is sent at start and on each SIGWINCH.
func (c *cli) runShell(ctx context.Context, cl *client.Client, id string, rank int, argv []string, stdin io.Reader) (int, error) {
	o := client.ShellOptions{Rank: rank, Command: argv, Term: os.Getenv("TERM")}
	inFile, _ := stdin.(*os.File)
	if inFile != nil && term.IsTerminal(int(inFile.Fd())) {
		o.TTY = true
		o.Cols, o.Rows = termSize(inFile)
	}
	conn, err := cl.Shell(ctx, id, o)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stopClose := context.AfterFunc(ctx, func() { conn.Close() }) // ctx's end ends the session
	defer stopClose()
	out := shellproto.NewWriter(conn)
	if o.TTY {
		old, err := term.MakeRaw(int(inFile.Fd()))
		if err != nil {
			return 0, fmt.Errorf("terminal: %w", err)
		}
		defer term.Restore(int(inFile.Fd()), old)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				cols, rows := termSize(inFile)
				if out.WriteResize(rows, cols) != nil {
					return
				}
			}
		}()
	}
	go sendInput(stdin, out)
	return relayOutput(conn, c.stdout, c.stderr)
}

// termSize is the terminal's size (80x24 when it cannot be read).
func termSize(f *os.File) (cols, rows uint16) {
	w, h, err := term.GetSize(int(f.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24
	}
	return uint16(min(w, 65535)), uint16(min(h, 65535))
}

// sendInput sends stdin as Data frames, then EOF.
func sendInput(stdin io.Reader, out *shellproto.Writer) {
	buf := make([]byte, 32<<10)
	for {
		n, err := stdin.Read(buf)
		if n > 0 && out.Write(shellproto.Data, buf[:n]) != nil {
			return
		}
		if err != nil {
			out.Write(shellproto.EOF, nil)
			return
		}
	}
}

// relayOutput writes the session's output until its Exit frame, and
// returns the code in it.
func relayOutput(conn net.Conn, stdout, stderr io.Writer) (int, error) {
	reason := ""
	for {
		f, err := shellproto.Read(conn)
		if err != nil {
			if reason != "" {
				return exitError, nil // the reason is printed
			}
			return 0, fmt.Errorf("the shell's connection ended before its exit code: %w", err)
		}
		switch f.Type {
		case shellproto.Data:
			stdout.Write(f.Payload)
		case shellproto.Stderr:
			stderr.Write(f.Payload)
		case shellproto.Error:
			reason = string(f.Payload)
			stderr.Write(f.Payload)
		case shellproto.Notice:
			stderr.Write(f.Payload)
		case shellproto.Exit:
			return f.Code(), nil
		}
	}
}
