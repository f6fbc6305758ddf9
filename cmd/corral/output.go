package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/cmdkit"
)

// emit prints v as indented JSON with -o json, and with table otherwise;
// a table's control characters are written out (see termSafe).
func (c *cli) emit(v any, table func(w io.Writer) error) error {
	if c.json() {
		return writeJSON(c.stdout, v)
	}
	w := &termWriter{w: c.stdout}
	if err := table(w); err != nil {
		return err
	}
	return w.flush()
}

// writeJSON prints v as indented JSON, the way the API answers it (without
// HTML escaping, so that commands like "a && b" stay readable).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// table writes tab-separated rows as aligned columns (cmdkit.Table, with
// the names the CLI's commands use).
type table struct{ t *cmdkit.Table }

// newTable starts a table on w with the given column headers (none: no
// header row).
func newTable(w io.Writer, headers ...string) *table {
	return &table{cmdkit.NewTable(w, headers...)}
}

// row adds one row; cells are cleaned of tabs and newlines.
func (t *table) row(cells ...string) { t.t.Row(cells...) }

// flush writes the table out.
func (t *table) flush() error { return t.t.Flush() }

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// fmtDuration writes d for people: 42s, 3m12s, 2h5m, 3d4h.
func fmtDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	default:
		return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
	}
}

// fmtSeconds writes a number of seconds as fmtDuration does.
func fmtSeconds(s float64) string {
	return fmtDuration(time.Duration(s * float64(time.Second)))
}

// fmtTime writes t in local time, short when it is today.
func fmtTime(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t = t.Local()
	n := now.Local()
	if t.Year() == n.Year() && t.YearDay() == n.YearDay() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04")
}

// fmtTimeFull writes t with its age, for detail views.
func fmtTimeFull(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	rel := fmtDuration(d) + " ago"
	if d < 0 {
		rel = "in " + fmtDuration(-d)
	}
	return fmt.Sprintf("%s (%s)", t.Local().Format("2006-01-02 15:04:05 MST"), rel)
}

// fmtIn writes how long until t: "in 4m10s", "now", or "-" when unknown.
func fmtIn(wait *float64, at *time.Time, now time.Time) string {
	var d time.Duration
	switch {
	case wait != nil:
		d = time.Duration(*wait * float64(time.Second))
	case at != nil && !at.IsZero():
		d = at.Sub(now)
	default:
		return "-"
	}
	if d < time.Second {
		return "now"
	}
	return "in " + fmtDuration(d)
}

// fmtStartRange writes an estimated start's range as clock times, "14:10
// to 15:40" (with the date when not today), or "" when there is none or
// both ends fall in the same minute.
func fmtStartRange(low, high *time.Time, now time.Time) string {
	if low == nil || high == nil || !high.After(*low) {
		return ""
	}
	clock := func(t time.Time) string {
		t, n := t.Local(), now.Local()
		if t.Year() == n.Year() && t.YearDay() == n.YearDay() {
			return t.Format("15:04")
		}
		return t.Format("Jan 2 15:04")
	}
	from, to := clock(*low), clock(*high)
	if from == to {
		return "" // within one minute: said as one time
	}
	return from + " to " + to
}

// fmtEstStart writes an estimated start: its range when it has one,
// else how long until it ("in 4m10s", "now", "-").
func fmtEstStart(wait *float64, at, low, high *time.Time, now time.Time) string {
	if r := fmtStartRange(low, high, now); r != "" {
		return r
	}
	return fmtIn(wait, at, now)
}

// fmtMiB writes a memory size given in MiB: 80G, 1.5G, 512M.
func fmtMiB(mib int64) string {
	if mib < 1024 {
		return strconv.FormatInt(mib, 10) + "M"
	}
	return strings.TrimSuffix(strconv.FormatFloat(float64(mib)/1024, 'f', 1, 64), ".0") + "G"
}

// fmtGB writes a size in GB without a needless fraction.
func fmtGB(gb float64) string {
	return strconv.FormatFloat(gb, 'f', -1, 64) + " GB"
}

// fmtGPUs writes a GPU request: "4", or "2x4" for 2 nodes of 4 GPUs each.
func fmtGPUs(perNode, nodes int) string {
	if nodes > 1 {
		return fmt.Sprintf("%dx%d", nodes, perNode)
	}
	return strconv.Itoa(perNode)
}

// perNodeGPUs is the per-node GPU count of a job that asks for total GPUs over
// nodes nodes (the queue reports the total; fmtGPUs wants the per-node count).
func perNodeGPUs(total, nodes int) int {
	if nodes > 1 {
		return total / nodes
	}
	return total
}

// onOff writes a switch.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// shortIDMin is the fewest characters of a job id a table shows.
const shortIDMin = 12

// shortIDs returns, for each of ids, its shortest prefix of at least min
// characters that no other of ids starts with (the whole id when it is
// shorter, or when only the whole id tells it apart), in the same order.
// Tables show these; the server takes any unique prefix of 6 or more.
func shortIDs(ids []string, least int) []string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	need := make(map[string]int, len(ids))
	for i, id := range sorted {
		n := least
		if i > 0 {
			n = max(n, commonPrefix(id, sorted[i-1])+1)
		}
		if i+1 < len(sorted) {
			n = max(n, commonPrefix(id, sorted[i+1])+1)
		}
		need[id] = n
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id[:min(need[id], len(id))]
	}
	return out
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// parseMemMiB reads a memory size in MiB as Slurm's --mem does
// (cmdkit.ParseMemMiB).
func parseMemMiB(s string) (int64, error) { return cmdkit.ParseMemMiB(s) }
