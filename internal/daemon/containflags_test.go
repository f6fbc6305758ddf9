package daemon

import "testing"

func TestParseNodePids(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "5000": 5000, " 24000 ": 24000, "4194304": 4194304} {
		if got, err := parseNodePids(in); err != nil || got != want {
			t.Errorf("parseNodePids(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"auto", ""} {
		if got, err := parseNodePids(in); err != nil || got < 1024 {
			t.Errorf("parseNodePids(%q) = %d, %v; want this machine's default, at least 1024", in, got, err)
		}
	}
	for _, in := range []string{"-1", "lots", "4194305", "1.5", "75%"} {
		if got, err := parseNodePids(in); err == nil {
			t.Errorf("parseNodePids(%q) = %d, want an error", in, got)
		}
	}
}
