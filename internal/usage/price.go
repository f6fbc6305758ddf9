package usage

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Prices are dollars per GPU-hour by GPU model name (as an admin types it:
// "H100"). A model's price is that of its exact name, else of the longest
// name that is a case-insensitive substring of it ("H100" prices "NVIDIA
// H100 80GB HBM3"), as --gpu-type matches.
type Prices map[string]float64

// For returns the price of a GPU model.
func (p Prices) For(model string) (float64, bool) {
	if v, ok := p[model]; ok {
		return v, true
	}
	m := strings.ToLower(model)
	best, price := "", 0.0
	for name, v := range p {
		if name != "" && strings.Contains(m, strings.ToLower(name)) && (len(name) > len(best) || len(name) == len(best) && name < best) {
			best, price = name, v
		}
	}
	return price, best != ""
}

// ValidPrice reports what is wrong with a price for a model.
func ValidPrice(model string, dollarsPerHour float64) error {
	if strings.TrimSpace(model) == "" || len(model) > 128 || strings.ContainsAny(model, "/\n\r\t\x00") || !utf8.ValidString(model) {
		return fmt.Errorf("model: %q is not a GPU model name (1 to 128 characters, no slash or control characters)", model)
	}
	if dollarsPerHour < 0 || math.IsNaN(dollarsPerHour) || math.IsInf(dollarsPerHour, 0) || dollarsPerHour > 1e6 {
		return fmt.Errorf("dollars_per_hour: %v is not a price (0 to 1000000 dollars per GPU-hour)", dollarsPerHour)
	}
	return nil
}

// CSV writes the report as CSV: a header row, then one row per group
// (no total row). Columns: the grouping, records, gpu_seconds, gpu_hours,
// used_gpu_seconds, used_gpu_hours, efficiency, cost.
func CSV(rep Report) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	by := rep.By
	if by == "" {
		by = ByUser
	}
	w.Write([]string{strings.ReplaceAll(by, "-", "_"), "records", "gpu_seconds", "gpu_hours", "used_gpu_seconds", "used_gpu_hours", "efficiency", "cost"})
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	for _, r := range rep.Rows {
		w.Write([]string{r.Key, strconv.Itoa(r.Records), f(r.GPUSeconds, 3), f(r.GPUHours, 6), f(r.UsedGPUSeconds, 3), f(r.UsedGPUHours, 6), f(r.Efficiency, 4), f(r.Cost, 4)})
	}
	w.Flush()
	return b.Bytes()
}
