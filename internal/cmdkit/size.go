package cmdkit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseMemMiB reads a memory size in MiB: a number with an optional
// binary unit, K, M (the default), G or T (also KiB, MB, ...), as Slurm's
// --mem. "" and "0" are 0 (no limit).
func ParseMemMiB(s string) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	b, ok := ParseSize(s, 1<<20)
	if !ok {
		return 0, fmt.Errorf("%q: want a size such as 512M, 64G or 1T", s)
	}
	mib := b / (1 << 20)
	if mib > 1<<40 {
		return 0, fmt.Errorf("%q: want 0 up to 1024P", s)
	}
	return int64(math.Ceil(mib)), nil
}

// ParseSize reads a size in bytes: a number with an optional binary unit,
// K, M, G or T (also KiB, MB, ..., in any case); a plain number counts in
// units of unit bytes. False when s is no such size, or negative, NaN or
// infinite. (--max-log-size counts plain numbers in bytes, --mem and
// --default-mem-per-gpu in MiB, as Slurm's --mem.)
func ParseSize(s string, unit float64) (float64, bool) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := unit
	if t != "" {
		if i := strings.IndexByte("KMGT", t[len(t)-1]); i >= 0 {
			mult = float64(int64(1) << (10 * (i + 1)))
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, false
	}
	return n * mult, true
}
