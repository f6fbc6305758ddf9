package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// elasticFlags are the elastic part of corral submit's and corral run's
// flags: --gpus MIN-MAX fills min (and submitFlags.gpus, the maximum),
// --elastic-wait fills wait.
type elasticFlags struct {
	min  int
	wait string
}

// gpusValue is --gpus: a count N, or an elastic range MIN-MAX (Slurm-like
// "4-8"). It sets *max to N or MAX and *min to MIN (0 for a plain count).
type gpusValue struct{ min, max *int }

func (g gpusValue) String() string {
	if g.max == nil {
		return "0"
	}
	return fmtGPURange(*g.min, *g.max, 1)
}

// Set parses N or MIN-MAX; MIN-MAX needs 1 <= MIN <= MAX.
func (g gpusValue) Set(s string) error {
	lo, hi, ranged := strings.Cut(strings.TrimSpace(s), "-")
	max, err := strconv.Atoi(strings.TrimSpace(lo))
	if err != nil || max < 0 {
		return fmt.Errorf("want a count such as 4, or a range MIN-MAX such as 4-8, not %q", s)
	}
	if !ranged {
		*g.min, *g.max = 0, max
		return nil
	}
	min := max
	if max, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || max < 0 {
		return fmt.Errorf("want a range MIN-MAX such as 4-8, not %q", s)
	}
	if min < 1 || min > max {
		return fmt.Errorf("the range %q needs 1 <= MIN <= MAX", s)
	}
	*g.min, *g.max = min, max
	return nil
}

func (g gpusValue) Type() string { return "N|MIN-MAX" }

// apply puts the elastic request into the submit body.
func (e *elasticFlags) apply(req *api.SubmitRequest) error {
	if e.wait != "" {
		if e.min == 0 {
			return usagef("--elastic-wait applies to an elastic count only: give --gpus MIN-MAX, e.g. --gpus 4-8")
		}
		d, err := normDuration("--elastic-wait", e.wait) // durflag.go
		if err != nil {
			return err
		}
		req.ElasticWait = rawString(d)
	}
	if e.min > 0 {
		min := e.min
		req.GPUCountMin = &min
	}
	return nil
}

// fmtGPURange writes a GPU request for tables: "4-8" for an elastic one
// (min > 0), else as fmtGPUs.
func fmtGPURange(min, perNode, nodes int) string {
	if min > 0 && min < perNode && nodes <= 1 {
		return fmt.Sprintf("%d-%d", min, perNode)
	}
	return fmtGPUs(perNode, nodes)
}

// fmtJobGPUs writes a job's GPUs for corral jobs: "4-8" for an elastic
// request not yet started, "6 (4-8)" once it was granted 6.
func fmtJobGPUs(j api.Job) string {
	s := fmtGPURange(j.GPUCountMin, j.GPUCount, j.Nodes)
	if j.GPUCountMin > 0 && j.GrantedGPUs > 0 {
		s = fmt.Sprintf("%d (%s)", j.GrantedGPUs, s)
	}
	return s
}

// fmtElastic writes the elastic part of a request for corral show ("" for
// a fixed count).
func fmtElastic(j api.Job) string {
	if j.GPUCountMin <= 0 {
		return ""
	}
	s := fmt.Sprintf("elastic %d-%d", j.GPUCountMin, j.GPUCount)
	if j.ElasticWait != nil && j.ElasticWait.Duration() > 0 {
		s += fmt.Sprintf(", waits up to %s for %d", fmtDuration(j.ElasticWait.Duration()), j.GPUCount)
	}
	return s
}
