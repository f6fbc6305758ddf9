package daemon

import (
	"testing"
)

func TestParseByteSize(t *testing.T) {
	tests := map[string]int64{"0": 0, "4096": 4096, "64KiB": 64 << 10, "64k": 64 << 10, "500M": 500 << 20, "1GiB": 1 << 30,
		"1G": 1 << 30, "1.5GB": 3 << 29, "2T": 2 << 40, " 10 MiB ": 10 << 20}
	for in, want := range tests {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "lots", "1X", "1e30", "NaN", "NaNG", "Inf"} {
		if got, err := parseByteSize(bad); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", bad, got)
		}
	}
}

func TestPercentFlag(t *testing.T) {
	for in, want := range map[string]percent{"5": 5, "5%": 5, "0": 0, "100%": 100, "2.5%": 2.5} {
		var p percent
		if err := p.Set(in); err != nil || p != want {
			t.Errorf("percent %q = %v, %v; want %v", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "101", "x%"} {
		var p percent
		if err := p.Set(bad); err == nil {
			t.Errorf("percent %q accepted", bad)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	for n, want := range map[byteSize]string{0: "0", 1 << 30: "1GiB", 500 << 20: "500MiB", 64 << 10: "64KiB", 1000: "1000"} {
		if got := n.String(); got != want {
			t.Errorf("%d: %q, want %q", int64(n), got, want)
		}
	}
}
