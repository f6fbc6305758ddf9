package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/batchscript"
	"github.com/corral-sched/corral/internal/timespec"
)

// slurmOpts are corral submit's (and run's) Slurm-named options and its
// batch script (docs/jobs.md, "Batch scripts").
type slurmOpts struct {
	output, errorPath string // -o/--output, -e/--error: files on the node, Slurm's patterns
	begin             string // --begin, resolved against the clock by prepareSlurm
	signal            string // --signal [B:]SIG[@TIME]
	json              bool   // --json: print the API's answer

	script, scriptName string            // a batch script's body and file name
	sources            map[string]string // flag name -> "#CORRAL" or "#SBATCH", for flags the headers set
}

func (s *slurmOpts) register(fl *pflag.FlagSet) {
	fl.StringVarP(&s.output, "output", "o", "", "also write the job's stdout (and stderr, without -e) to this file on the node, as sbatch -o: "+
		"%j job id, %x name, %u user, %A array id, %a task index, %N node, %t rank, %% a %; relative to -D (json or table here means --json, as before)")
	fl.StringVarP(&s.errorPath, "error", "e", "", "also write the job's stderr to this file on the node (patterns as -o)")
	fl.StringVar(&s.begin, "begin", "", "start no earlier than this: now+2hours, now+30min, 16:00, tomorrow, 2026-12-01, 2026-12-01T10:00 or RFC 3339")
	fl.StringVar(&s.signal, "signal", "", "send a signal this long before the time limit: [B:]SIG[@SECONDS], e.g. USR1@120 (default 60 s; B: the script's own process only)")
	fl.BoolVar(&s.json, "json", false, "print the submitted job as the API's JSON")
}

// aliases are the submit flags that set one value under two names.
var aliases = map[string][]string{
	"time": {"time", "time-limit"}, "time-limit": {"time", "time-limit"},
	"name": {"name", "job-name"}, "job-name": {"name", "job-name"},
	"workdir": {"workdir", "chdir"}, "chdir": {"workdir", "chdir"},
}

// changed reports whether fs set flag name, under any of its names.
func changed(fs *pflag.FlagSet, name string) bool {
	names := aliases[name]
	if names == nil {
		names = []string{name}
	}
	for _, n := range names {
		if fs.Changed(n) {
			return true
		}
	}
	return false
}

// from says where flag name's value came from: the command line (flag)
// or a header (#CORRAL, #SBATCH).
func (s *slurmOpts) from(cmd *cobra.Command, name string) string {
	for _, n := range append(aliases[name], name) {
		if src := s.sources[n]; src != "" {
			return src
		}
	}
	return "flag"
}

// command is the job's command: a script's arguments, each quoted, or
// the command as joinCommand makes it.
func (s *slurmOpts) command(args []string) string {
	if s.script == "" {
		return joinCommand(args)
	}
	quoted := make([]string, 0, len(args))
	for _, a := range args[1:] {
		quoted = append(quoted, shellQuote(a))
	}
	return strings.Join(quoted, " ")
}

// apply puts the options into the submission.
func (s *slurmOpts) apply(req *api.SubmitRequest) error {
	req.Script, req.ScriptName = s.script, s.scriptName
	for _, o := range []struct {
		flag, p string
		dst     *string
	}{{"-o/--output", s.output, &req.Output}, {"-e/--error", s.errorPath, &req.Error}} {
		if o.p == "" {
			continue
		}
		if err := batchscript.CheckPattern(o.p); err != nil {
			return usagef("%s %q: %v", o.flag, o.p, err)
		}
		*o.dst = o.p
	}
	if s.signal != "" {
		sig, err := batchscript.ParseSignal(s.signal)
		if err != nil {
			return usagef("--signal: %v", err)
		}
		req.Signal = sig.String()
	}
	req.Begin = s.begin
	return nil
}

// prepareSlurm readies the Slurm-named options before the request is
// built: --json (and -o json|table, its old spelling), a batch script
// named as the first argument with its headers, and --begin read against
// the clock here (so that "16:00" is the caller's 16:00).
func (c *cli) prepareSlurm(cmd *cobra.Command, f *submitFlags, args []string) error {
	s := &f.slurm
	if s.output == outputJSON || s.output == outputTable {
		c.output, s.output = s.output, "" // -o json before submit's -o named a file
	}
	if s.json {
		c.output = outputJSON
	}
	if cmd.ArgsLenAtDash() < 0 && len(args) > 0 {
		if fi, err := os.Stat(args[0]); err == nil && fi.Mode().IsRegular() {
			if err := c.loadScript(cmd, f, args[0], fi.Size()); err != nil {
				return err
			}
		}
	}
	if s.begin != "" {
		at, err := timespec.At(s.begin, c.now())
		if err != nil {
			return usagef("--begin: %w", err)
		}
		s.begin = at.Format(time.RFC3339)
	}
	return nil
}

// loadScript reads a batch script (its contents are the job's from now
// on) and applies its header: the command line wins over #CORRAL, which
// wins over #SBATCH.
func (c *cli) loadScript(cmd *cobra.Command, f *submitFlags, path string, size int64) error {
	if size > batchscript.MaxScriptSize {
		return usagef("%s: a batch script may have at most %d bytes, not %d", path, batchscript.MaxScriptSize, size)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the batch script: %w", err)
	}
	if !strings.HasPrefix(string(body), "#!") {
		return usagef("%s does not look like a batch script: its first line must start with #! and the path of an interpreter (#!/bin/bash); to run a program, put it after --", path)
	}
	h, err := batchscript.ParseHeader(string(body))
	if err != nil {
		return usagef("%s: %w", path, err)
	}
	f.slurm.script, f.slurm.scriptName = string(body), filepath.Base(path)
	f.slurm.sources = map[string]string{}
	sbatch, unknown := knownFlags(cmd.Flags(), h.Sbatch)
	ignored := append(h.Ignored, unknown...)
	// #CORRAL first: what it sets, #SBATCH may no longer.
	for _, hd := range []struct {
		name  string
		words []string
	}{{"#CORRAL", h.Corral}, {"#SBATCH", sbatch}} {
		if len(hd.words) == 0 {
			continue
		}
		if err := c.applyHeader(cmd, f, hd.name, hd.words); err != nil {
			return usagef("%s: %s header: %w", path, hd.name, err)
		}
	}
	if len(ignored) > 0 {
		fmt.Fprintf(c.stderr, "corral: %s: #SBATCH options Corral does not share were ignored: %s (docs/jobs.md, \"Batch scripts\")\n",
			path, strings.Join(ignored, ", "))
	}
	if !changed(cmd.Flags(), "name") {
		f.name = f.slurm.scriptName // sbatch's default job name
	}
	return nil
}

// knownFlags splits translated #SBATCH flag pairs into those submit has
// and those it lacks.
func knownFlags(fs *pflag.FlagSet, pairs []string) (known, unknown []string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		name := strings.TrimLeft(pairs[i], "-")
		var fl *pflag.Flag
		if len(name) == 1 && !strings.HasPrefix(pairs[i], "--") {
			fl = fs.ShorthandLookup(name)
		} else {
			fl = fs.Lookup(name)
		}
		if fl == nil {
			unknown = append(unknown, pairs[i]+"="+pairs[i+1])
			continue
		}
		known = append(known, pairs[i], pairs[i+1])
	}
	return known, unknown
}

// applyHeader parses one header's flags and sets those that neither the
// command line nor an earlier header set.
func (c *cli) applyHeader(cmd *cobra.Command, f *submitFlags, name string, words []string) error {
	scratch := &cobra.Command{Use: "header"}
	var hf submitFlags
	hf.register(scratch)
	fs := scratch.Flags()
	fs.SetInterspersed(true)
	if err := fs.Parse(words); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%q is not a flag", fs.Arg(0))
	}
	var err error
	fs.Visit(func(fl *pflag.Flag) {
		if err != nil || changed(cmd.Flags(), fl.Name) {
			return
		}
		to := cmd.Flags().Lookup(fl.Name)
		if to == nil {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			if tv, ok := to.Value.(pflag.SliceValue); ok {
				err = tv.Replace(sv.GetSlice())
				to.Changed = true
			}
		} else {
			err = cmd.Flags().Set(fl.Name, fl.Value.String())
		}
		f.slurm.sources[fl.Name] = name
	})
	return err
}

// fmtLimit writes a time limit or estimate with where it came from:
// "2h0m0s (flag)", "5s (#SBATCH)", "8h0m0s (server default)".
func fmtLimit(v *api.Seconds, from, none string) string {
	if v == nil {
		return none
	}
	d := v.Duration().String()
	switch from {
	case "":
		return d
	case "default":
		return d + " (server default)"
	case "api":
		return d + " (API)"
	}
	return d + " (" + from + ")"
}

// fmtScript writes a job's batch script for corral show: its name and
// size (corral show -o json, or GET /jobs/ID, gives its text).
func fmtScript(j api.Job) string {
	name := j.ScriptName
	if name == "" {
		name = "(script)"
	}
	if j.Script == "" || j.Script == "(hidden)" {
		return name
	}
	return fmt.Sprintf("%s (%d bytes, %d lines; its text: corral show -o json)", name, len(j.Script), strings.Count(j.Script, "\n"))
}
