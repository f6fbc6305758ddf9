package daemon

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/lazyre"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// migProfileFlag is what --notebook-mig accepts: a MIG profile such as
// 1g.10gb.
var migProfileFlag = lazyre.New(`^([0-9]+c\.)?[0-9]+g\.[0-9]+gb(\+[a-z]+)?$`)

// gpuShareFlags is --notebook-mig of `corral server` and `corral up`: the
// MIG slice a notebook gets by default (docs/cluster.md "Placing slices
// and shares").
type gpuShareFlags struct{ notebookMIG string }

func (f *gpuShareFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.notebookMIG, "notebook-mig", "",
		"the MIG profile (e.g. 1g.10gb) a notebook gets instead of a whole GPU when it asks for 1 GPU of no type, memory, slice or share and some GPU has slices of that profile; empty: whole GPUs")
}

// apply puts the flag in the orchestrator's configuration.
func (f *gpuShareFlags) apply(cfg *orchestrator.Config) error {
	p := strings.ToLower(strings.TrimSpace(f.notebookMIG))
	if p != "" && !migProfileFlag.MatchString(p) {
		return cmdkit.Usagef("--notebook-mig %q: want a MIG profile such as 1g.10gb", f.notebookMIG)
	}
	cfg.NotebookMIG = p
	return nil
}
