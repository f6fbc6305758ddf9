// Package jobio is the submit check of what a job carries for its run
// beyond its command: a batch script, output and error paths, --begin,
// --signal, and where its time limit and estimate came from. It is a
// feature of the orchestrator's loop (feature.SubmitCheck).
package jobio

import (
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/batchscript"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/timespec"
)

// Where a job's time limit or estimate came from (api.JobIO).
const (
	FromFlag    = "flag"
	FromCorral  = "#CORRAL"
	FromSbatch  = "#SBATCH"
	FromAPI     = "api"
	FromDefault = "default" // a server's default or cap, set after the checks
)

// maxNameLen bounds a script's file name.
const maxNameLen = 256

// Check is the submit check (feature.SubmitCheck).
type Check struct{}

// CheckSubmit checks and copies the submission's script, paths and
// sources into its job.
func (Check) CheckSubmit(s *feature.Submission) error { return Validate(s.Request, s.Job, s.Now) }

// Validate checks and copies a submission's batch script, output
// files, --begin, --signal and the sources of its time limit and estimate
// into j. Every error names its field.
func Validate(req *api.SubmitRequest, j *api.Job, now time.Time) error {
	if len(req.Script) > batchscript.MaxScriptSize {
		return api.Invalid("script", "is %d bytes; at most %d are allowed", len(req.Script), batchscript.MaxScriptSize)
	}
	if strings.ContainsRune(req.Script, 0) || !utf8.ValidString(req.Script) {
		return api.Invalid("script", "must be valid UTF-8 without NUL bytes")
	}
	if req.Script != "" && strings.TrimSpace(req.Script) == "" {
		return api.Invalid("script", "is empty")
	}
	j.Script = req.Script
	if n := req.ScriptName; n != "" {
		if req.Script == "" {
			return api.Invalid("script_name", "is given without a script")
		}
		if len(n) > maxNameLen || strings.ContainsAny(n, "/\x00\n") || n == "." || n == ".." {
			return api.Invalid("script_name", "must be a file name (no '/'), at most %d characters", maxNameLen)
		}
		j.ScriptName = n
	}
	for _, f := range []struct {
		field string
		p     string
		dst   *string
	}{{"output", req.Output, &j.Output}, {"error", req.Error, &j.Error}} {
		if f.p == "" {
			continue
		}
		if err := batchscript.CheckPattern(f.p); err != nil {
			return api.Invalid(f.field, "%s", err.Error())
		}
		if !filepath.IsAbs(f.p) && j.Workdir == "" {
			return api.Invalid(f.field, "a relative path needs a workdir")
		}
		*f.dst = f.p
	}
	if req.Begin != "" {
		at, err := timespec.At(req.Begin, now)
		if err != nil {
			return api.Invalid("begin", "%s", err.Error())
		}
		if at.After(now) {
			at = at.UTC()
			j.Begin = &at
		}
	}
	if req.Signal != "" {
		s, err := batchscript.ParseSignal(req.Signal)
		if err != nil {
			return api.Invalid("signal", "%s", err.Error())
		}
		j.Signal = s.String()
	}
	var err error
	if j.TimeLimitFrom, err = source("time_limit_from", req.TimeLimitFrom, !api.IsNull(req.TimeLimit)); err != nil {
		return err
	}
	j.EstimateFrom, err = source("estimate_from", req.EstimateFrom, !api.IsNull(req.EstimatedDuration))
	return err
}

// source checks a *_from field: flag, #CORRAL or #SBATCH for a value
// given (empty: api); nothing when no value was given.
func source(field, from string, given bool) (string, error) {
	switch {
	case !given && from != "":
		return "", api.Invalid(field, "is given without its value")
	case !given:
		return "", nil
	case from == "":
		return FromAPI, nil
	case from == FromFlag || from == FromCorral || from == FromSbatch:
		return from, nil
	}
	return "", api.Invalid(field, "%q: want flag, #CORRAL or #SBATCH", cut(from, 40))
}

// cut shortens s to n bytes for an error message.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
