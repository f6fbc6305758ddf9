package gpu

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// A simulated MIG layout is the last field of --simulate-gpus:
//
//	mig=GPUS:PROFILES[,GPUS:PROFILES...]
//	GPUS:     an index (0), a range (0-3) or all
//	PROFILES: PROFILE[*COUNT][+PROFILE[*COUNT]...], in slot order
//	PROFILE:  Ng.Mgb, N compute slices (1, 2, 3, 4 or 7) of the GPU's 7
//	          and M GB of memory, a whole number of eighths of the GPU's
//	          (1, 2, 4 or 8 of them)
//
// e.g. 8:H100:80:mig=0-3:1g.10gb*7,4:3g.40gb+4g.40gb: GPUs 0-3 in seven
// 1g.10gb slices each, GPU 4 in a 3g.40gb and a 4g.40gb, GPUs 5-7 whole
// (MIG off). A GPU's profiles may take at most its 7 compute slices and 8
// memory slices. The simulated GPU reports them as NVML reports a real
// one's: MIG mode enabled, and per MIG device its slot, a UUID
// (MIG-sim-NODE-GPU-SLOT), profile, memory (its eighths of the GPU's),
// compute slices, GPU instance (slot+1) and compute instance (0).

// MIG slice counts of the GPUs that have MIG (A100, H100, H200, B200).
const (
	MIGComputeSlices = 7
	MIGMemorySlices  = 8
)

// migProfileSlices reads a profile's compute slices and memory in GB:
// "3g.40gb" -> 3, 40. A compute instance smaller than its GPU instance
// ("1c.3g.40gb", as NVML names it) counts its own compute slices.
func migProfileSlices(profile string) (compute int, memGB float64, ok bool) {
	p := strings.ToLower(strings.TrimSpace(profile))
	ci := 0
	if c, rest, found := strings.Cut(p, "c."); found {
		n, err := strconv.Atoi(c)
		if err != nil {
			return 0, 0, false
		}
		ci, p = n, rest
	}
	g, mem, found := strings.Cut(p, "g.")
	if !found {
		return 0, 0, false
	}
	mem, _, _ = strings.Cut(mem, "+") // "1g.10gb+me": media extensions
	n, err := strconv.Atoi(g)
	m, merr := strconv.ParseFloat(strings.TrimSuffix(mem, "gb"), 64)
	if err != nil || merr != nil || n < 1 || m <= 0 || !strings.HasSuffix(mem, "gb") {
		return 0, 0, false
	}
	if ci > 0 {
		n = ci
	}
	return n, m, true
}

// MIGComputeSlicesOf is the compute slices of a MIG device of profile p
// (0 where the profile names none).
func MIGComputeSlicesOf(p string) int {
	n, _, _ := migProfileSlices(p)
	return n
}

// parseSimMIG reads the layout after "mig=" for count GPUs of memGB each.
func parseSimMIG(s string, count int, memGB float64) (map[int][]string, error) {
	out := map[int][]string{}
	for group := range strings.SplitSeq(s, ",") {
		gpus, profiles, ok := strings.Cut(strings.TrimSpace(group), ":")
		if !ok || profiles == "" {
			return nil, fmt.Errorf("mig group %q: want GPUS:PROFILES, e.g. 0-3:1g.10gb*7", group)
		}
		idx, err := parseGPURange(gpus, count)
		if err != nil {
			return nil, err
		}
		var layout []string
		for part := range strings.SplitSeq(profiles, "+") {
			p, times, _ := strings.Cut(strings.TrimSpace(part), "*")
			n := 1
			if times != "" {
				if n, err = strconv.Atoi(times); err != nil || n < 1 || n > MIGComputeSlices {
					return nil, fmt.Errorf("mig profile %q: count %q: want 1-%d", part, times, MIGComputeSlices)
				}
			}
			p = strings.ToLower(p)
			if _, _, err := simMIGSlices(p, memGB); err != nil {
				return nil, err
			}
			for range n {
				layout = append(layout, p)
			}
		}
		compute, mem := 0, 0
		for _, p := range layout {
			c, m, _ := simMIGSlices(p, memGB)
			compute, mem = compute+c, mem+m
		}
		if compute > MIGComputeSlices || mem > MIGMemorySlices {
			return nil, fmt.Errorf("mig layout %q: %d compute slices and %d memory slices, a GPU has %d and %d",
				profiles, compute, mem, MIGComputeSlices, MIGMemorySlices)
		}
		for _, i := range idx {
			if _, dup := out[i]; dup {
				return nil, fmt.Errorf("mig: GPU %d given two layouts", i)
			}
			out[i] = layout
		}
	}
	return out, nil
}

// simMIGSlices checks a profile against a GPU of memGB and returns its
// compute and memory slices.
func simMIGSlices(p string, memGB float64) (compute, mem int, err error) {
	c, gb, ok := migProfileSlices(p)
	if !ok || strings.Contains(p, "c.") || strings.Contains(p, "+") {
		return 0, 0, fmt.Errorf("mig profile %q: want Ng.Mgb, e.g. 1g.10gb or 3g.40gb", p)
	}
	if !slices.Contains([]int{1, 2, 3, 4, 7}, c) {
		return 0, 0, fmt.Errorf("mig profile %q: %d compute slices; a GPU instance has 1, 2, 3, 4 or 7", p, c)
	}
	eighths := gb / (memGB / MIGMemorySlices)
	m := int(math.Round(eighths))
	if math.Abs(eighths-float64(m)) > 0.15 || !slices.Contains([]int{1, 2, 4, 8}, m) {
		return 0, 0, fmt.Errorf("mig profile %q: %s GB is not 1, 2, 4 or 8 eighths of a %s GB GPU", p,
			strconv.FormatFloat(gb, 'g', -1, 64), strconv.FormatFloat(memGB, 'g', -1, 64))
	}
	return c, m, nil
}

// parseGPURange reads an index, a range "A-B" or "all" of count GPUs.
func parseGPURange(s string, count int) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "all" || s == "*" {
		out := make([]int, count)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	lo, err := strconv.Atoi(a)
	hi := lo
	if err == nil && isRange {
		hi, err = strconv.Atoi(b)
	}
	if err != nil || lo < 0 || hi < lo || hi >= count {
		return nil, fmt.Errorf("mig GPUs %q: want an index, a range A-B or all, within 0-%d", s, count-1)
	}
	out := make([]int, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out, nil
}

// formatSimMIG writes a layout back in the flag's form, one group per GPU.
func formatSimMIG(layout map[int][]string) string {
	var groups []string
	for _, i := range slices.Sorted(maps.Keys(layout)) {
		groups = append(groups, fmt.Sprintf("%d:%s", i, strings.Join(layout[i], "+")))
	}
	return strings.Join(groups, ",")
}

// simMIG is the MIG state a simulated GPU reports: profiles (its layout;
// nil: MIG off), its memory memMiB.
func simMIG(nodeID string, gpu int, profiles []string, memMiB int64) *api.MIG {
	m := &api.MIG{Mode: api.MIGDisabled}
	if len(profiles) == 0 {
		return m
	}
	m.Mode, m.ComputeSlices = api.MIGEnabled, MIGComputeSlices
	for slot, p := range profiles {
		c, gb, _ := migProfileSlices(p)
		mem := int64(math.Round(gb/(float64(memMiB)/1024/MIGMemorySlices))) * memMiB / MIGMemorySlices
		m.Devices = append(m.Devices, api.MIGDevice{
			Index: slot, UUID: fmt.Sprintf("MIG-sim-%s-%d-%d", nodeID, gpu, slot), Profile: p,
			MemoryTotal: mem, GPUInstance: slot + 1, ComputeInstance: 0, ComputeSlices: c,
		})
	}
	return m
}

// SimMIGLayout reads a layout in --simulate-gpus's mig= form for count
// GPUs of memMiB each and returns each GPU's MIG state as a simulated
// node reports it (GPUs the layout does not name are absent): for
// corral sim --mig, which places slices on the same layouts.
func SimMIGLayout(layout string, count int, memMiB int64) (map[int]*api.MIG, error) {
	l, err := parseSimMIG(layout, count, float64(memMiB)/1024)
	if err != nil {
		return nil, err
	}
	out := make(map[int]*api.MIG, len(l))
	for g, profiles := range l {
		out[g] = simMIG("sim", g, profiles, memMiB)
	}
	return out, nil
}
