package gpu

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Defaults and limits for simulated GPUs (the --simulate-gpus flag).
const (
	DefaultSimModel    = "H100"
	DefaultSimMemoryGB = 80
	MaxSimGPUs         = 64
	MaxSimMemoryGB     = 1024
)

// SimSpec describes simulated GPUs: how many, which model, how much memory
// each, and how they are linked.
type SimSpec struct {
	Count    int
	Model    string
	MemoryGB float64
	// Topology is the NVLink layout: "nvlink" (all linked, like an HGX
	// board; the default), "pairs" (bridges joining 0-1, 2-3, ...), "quads"
	// or "none" (PCIe only).
	Topology string
	// MIG is the simulated MIG layout (simmig.go), in the flag's form
	// after "mig=", one group per GPU ("0:1g.10gb+1g.10gb,4:3g.40gb");
	// "": no GPU has MIG state.
	MIG string
}

// Topologies lists the simulated NVLink layouts and their group sizes (0:
// all GPUs in one group).
var topologies = map[string]int{"nvlink": 0, "pairs": 2, "quads": 4, "none": 1}

// String returns the spec in the flag's N:MODEL:MEMGB[:TOPOLOGY] form.
func (s SimSpec) String() string {
	out := fmt.Sprintf("%d:%s:%s", s.Count, s.Model, strconv.FormatFloat(s.MemoryGB, 'g', -1, 64))
	if s.Topology != "" && s.Topology != "nvlink" {
		out += ":" + s.Topology
	}
	if s.MIG != "" {
		out += ":mig=" + s.MIG
	}
	return out
}

// ParseSimulateSpec parses the value of --simulate-gpus
// N[:MODEL[:MEMGB[:TOPOLOGY]]][:mig=LAYOUT], for example "8", "8:H100",
// "4:A100:40", "8:A100:40:pairs" or "8:H100:80:mig=0-3:1g.10gb*7" (the
// layout: simmig.go). MODEL defaults to "H100", MEMGB to 80 and TOPOLOGY
// to nvlink; N must be 1..64 and MEMGB 1..1024 (fractions allowed).
func ParseSimulateSpec(s string) (SimSpec, error) {
	base, layout, hasMIG := strings.Cut(s, ":mig=")
	spec, err := parseSimBase(base)
	if err != nil || !hasMIG {
		return spec, err
	}
	m, err := parseSimMIG(layout, spec.Count, spec.MemoryGB)
	if err != nil {
		return SimSpec{}, fmt.Errorf("--simulate-gpus %q: %w (want mig=GPUS:PROFILES[,...], e.g. mig=0-3:1g.10gb*7,4:3g.40gb+4g.40gb)", s, err)
	}
	spec.MIG = formatSimMIG(m)
	return spec, nil
}

// parseSimBase parses --simulate-gpus up to its MIG layout.
func parseSimBase(s string) (SimSpec, error) {
	spec := SimSpec{Model: DefaultSimModel, MemoryGB: DefaultSimMemoryGB}
	bad := func(format string, args ...any) (SimSpec, error) {
		return SimSpec{}, fmt.Errorf("--simulate-gpus %q: %s (want N[:MODEL[:MEMGB[:TOPOLOGY]]], e.g. 8 or 4:A100:40 or 8:H100:80:pairs)",
			s, fmt.Sprintf(format, args...))
	}
	v := strings.TrimSpace(s)
	if v == "" {
		return bad("empty value")
	}
	parts := strings.Split(v, ":")
	if len(parts) > 4 {
		return bad("too many fields: %d, at most 4", len(parts))
	}

	n, err := strconv.Atoi(strings.TrimSpace(parts[0]))
	if err != nil {
		return bad("GPU count %q is not a whole number", parts[0])
	}
	if n < 1 || n > MaxSimGPUs {
		return bad("GPU count must be 1..%d, got %d", MaxSimGPUs, n)
	}
	spec.Count = n

	if len(parts) >= 2 {
		model := strings.TrimSpace(parts[1])
		switch {
		case model == "" && len(parts) == 2:
			return bad("model is empty")
		case model == "":
			// "8::40": default model, explicit memory.
		case strings.IndexFunc(model, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			return bad("model %q contains control characters", model)
		default:
			spec.Model = model
		}
	}

	spec.Topology = "nvlink"
	if len(parts) == 4 {
		t := strings.ToLower(strings.TrimSpace(parts[3]))
		if _, ok := topologies[t]; !ok {
			return bad("topology %q is not one of nvlink, pairs, quads, none", parts[3])
		}
		spec.Topology = t
	}
	if len(parts) == 3 || (len(parts) == 4 && strings.TrimSpace(parts[2]) != "") {
		raw := strings.TrimSpace(parts[2])
		raw = strings.TrimSuffix(strings.TrimSuffix(raw, "GB"), "gb")
		gb, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(gb) || math.IsInf(gb, 0) {
			return bad("memory %q is not a number of GB", parts[2])
		}
		if gb < 1 || gb > MaxSimMemoryGB {
			return bad("memory must be 1..%d GB, got %s", MaxSimMemoryGB, strconv.FormatFloat(gb, 'g', -1, 64))
		}
		spec.MemoryGB = gb
	}
	return spec, nil
}
