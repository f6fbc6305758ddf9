package cmdkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SelfName is what the start-up banners tell the user to type to run this
// binary again: see cliName.
func SelfName() string {
	return cliName(os.Args[0], exec.LookPath)
}

// cliName is "corral" when typing that runs the binary that was started as
// arg0 (it was found on PATH, or $PATH's corral is the same file), else
// arg0 itself, the path it was run as (e.g. ./corral, which a plain
// `corral` would not find). lookPath is exec.LookPath outside tests.
func cliName(arg0 string, lookPath func(string) (string, error)) string {
	if arg0 == "" || arg0 == "corral" {
		return "corral"
	}
	if !strings.ContainsRune(arg0, os.PathSeparator) {
		return arg0 // found on PATH under another name
	}
	onPath, err := lookPath("corral")
	if err != nil {
		return arg0
	}
	a, errA := os.Stat(onPath)
	b, errB := os.Stat(filepath.Clean(arg0))
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return "corral"
	}
	return arg0
}
