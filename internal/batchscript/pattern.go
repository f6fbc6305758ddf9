// Package batchscript reads what sbatch reads in a batch script and on its
// command line, without I/O: the #CORRAL and #SBATCH header lines, the
// filename patterns of -o/-e (%j, %x, %u, %A, %a, %N, %t, %%), and
// --signal's [B:]SIG[@TIME].
package batchscript

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxPatternLen bounds an -o/-e pattern.
const MaxPatternLen = 4096

// Fields are the values of a filename pattern's letters: j job id, x job
// name, u user, A array job id, a array task index, N node, n and t the
// rank. A letter whose value is absent from the map is kept as written
// (an executor whose engine fills it, such as Slurm's %N, passes it on).
type Fields map[byte]string

// CheckPattern reports what is wrong with an -o/-e pattern, or nil.
func CheckPattern(p string) error {
	switch {
	case len(p) > MaxPatternLen:
		return fmt.Errorf("is longer than %d bytes", MaxPatternLen)
	case strings.ContainsAny(p, "\x00\n\r"):
		return fmt.Errorf("must not hold a NUL byte or a line break")
	case strings.TrimSpace(p) == "":
		return fmt.Errorf("is empty")
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if j >= len(p) {
			return fmt.Errorf("%q ends in a lone %%", p)
		}
		if !strings.ContainsRune("jxuAaNnt%", rune(p[j])) {
			return fmt.Errorf("%%%c is not a pattern Corral knows (%%j, %%x, %%u, %%A, %%a, %%N, %%n, %%t, %%%%)", p[j])
		}
		i = j
	}
	return nil
}

// Expand fills p's patterns from f. "%4j" pads to 4 characters with zeros
// (for numbers) as Slurm does. "%%" becomes "%" when final, and stays
// "%%" otherwise (for an engine that expands the rest itself).
func Expand(p string, f Fields, final bool) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if j >= len(p) {
			b.WriteString(p[i:])
			break
		}
		letter := p[j]
		switch v, ok := f[letter]; {
		case letter == '%':
			if final {
				b.WriteByte('%')
			} else {
				b.WriteString("%%")
			}
		case ok:
			width, _ := strconv.Atoi(p[i+1 : j])
			if n := len(v); width > n && width <= 10 {
				if _, err := strconv.Atoi(v); err == nil {
					v = strings.Repeat("0", width-n) + v
				}
			}
			b.WriteString(v)
		default:
			b.WriteString(p[i : j+1])
		}
		i = j
	}
	return b.String()
}
