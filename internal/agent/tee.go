package agent

import (
	"flag"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/batchscript"
)

// runTee is `corral shim --tee [--output FILE] [--error FILE] [--forward
// SIG] -- COMMAND...`: it runs COMMAND with its stdout and stderr copied
// both to its own (the attempt's log) and to the files (sbatch -o/-e;
// without --error, stderr goes to --output too), truncated first as
// sbatch does, and exits as COMMAND did. It runs as the job's account, in
// the job's process group: the signals that stop the job reach COMMAND
// directly, so the tee only waits for the job's last output, passing on
// the one named by --forward (a --signal B: meant for the job's main
// process). Relative paths are from the working directory.
func runTee(args []string) int {
	fs := flag.NewFlagSet("tee", flag.ContinueOnError)
	outPath := fs.String("output", "", "file that gets stdout (and stderr, without --error)")
	errPath := fs.String("error", "", "file that gets stderr")
	forward := fs.String("forward", "", "a signal to pass on to COMMAND (USR1, ...)")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: corral shim --tee [--output FILE] [--error FILE] [--forward SIG] -- COMMAND...")
		return 2
	}
	// Caught, not ignored: an ignored signal would stay ignored in COMMAND.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGCONT, syscall.SIGURG, syscall.SIGXCPU, syscall.SIGPWR, syscall.SIGWINCH)
	cmd := osexec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin = os.Stdin
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	opened := map[string]*os.File{}
	open := func(flagName, path string) (*os.File, bool) {
		if f := opened[path]; f != nil {
			return f, true
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "corral: %s: %v\n", flagName, err)
			return nil, false
		}
		opened[path] = f
		return f, true
	}
	if *outPath != "" {
		f, ok := open("-o/--output", *outPath)
		if !ok {
			return 1
		}
		cmd.Stdout = copyTo{os.Stdout, f}
		cmd.Stderr = copyTo{os.Stderr, f}
	}
	if *errPath != "" {
		f, ok := open("-e/--error", *errPath)
		if !ok {
			return 1
		}
		cmd.Stderr = copyTo{os.Stderr, f}
	}
	cmd.WaitDelay = 2 * time.Second // output a child left behind holds open
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "corral: %v\n", err)
		return 127
	}
	pass := syscall.Signal(-1)
	if *forward != "" {
		if s, err := batchscript.ParseSignal(*forward); err == nil {
			pass = syscall.Signal(s.Number)
		}
	}
	go func() {
		for s := range sigs {
			if s == pass {
				cmd.Process.Signal(s)
			}
		}
	}()
	err := cmd.Wait()
	for _, f := range opened {
		f.Close()
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		signal.Reset(ws.Signal())
		syscall.Kill(os.Getpid(), ws.Signal()) // end as COMMAND did
		return 128 + int(ws.Signal())
	case cmd.ProcessState != nil:
		return cmd.ProcessState.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "corral: %v\n", err)
	return 1
}

// copyTo writes to the job's own stream, and a copy to the file; the
// copy's failure (a full disk) never stops the job's output.
type copyTo struct {
	w    io.Writer
	file *os.File
}

func (c copyTo) Write(p []byte) (int, error) {
	c.file.Write(p)
	return c.w.Write(p)
}
