package main

import (
	"os"
	"os/signal"
	"syscall"
)

// hangUpChildrenByDefault keeps SIGHUP's default for the processes Corral
// starts when Corral itself was started with it ignored (under nohup, or by
// a supervisor that ignores it). An ignored signal stays ignored across
// fork and exec, so every job and shell would inherit the ignore: a
// shell's hang-up (when its job ends, or its client goes) would not end
// it, nor would a job's own `kill -HUP`. Corral handles the signal instead,
// by dropping it: Corral itself still ignores hang-ups, and a handled
// signal is reset to its default in a child at exec. A SIGHUP that is not
// ignored at start is left as it is.
func hangUpChildrenByDefault() {
	if !signal.Ignored(syscall.SIGHUP) {
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	go func() {
		for range c { // dropped: ignored, as Corral was started
		}
	}()
}
