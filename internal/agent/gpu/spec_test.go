package gpu

import (
	"strings"
	"testing"
)

func TestParseSimulateSpec(t *testing.T) {
	good := []struct {
		in   string
		want SimSpec
	}{
		{"8", SimSpec{8, "H100", 80, "nvlink", ""}},
		{"1", SimSpec{1, "H100", 80, "nvlink", ""}},
		{"64", SimSpec{64, "H100", 80, "nvlink", ""}},
		{" 2 ", SimSpec{2, "H100", 80, "nvlink", ""}},
		{"8:H100", SimSpec{8, "H100", 80, "nvlink", ""}},
		{"4:A100:40", SimSpec{4, "A100", 40, "nvlink", ""}},
		{"2:L4:24.5", SimSpec{2, "L4", 24.5, "nvlink", ""}},
		{"2:H200:141GB", SimSpec{2, "H200", 141, "nvlink", ""}},
		{"2::40", SimSpec{2, "H100", 40, "nvlink", ""}},
		{"1:B200:1024", SimSpec{1, "B200", 1024, "nvlink", ""}},
		{"1:T4:1", SimSpec{1, "T4", 1, "nvlink", ""}},
		{"8:A100:40:pairs", SimSpec{8, "A100", 40, "pairs", ""}},
		{"8:H100::Quads", SimSpec{8, "H100", 80, "quads", ""}},
		{"4:L4:24:none", SimSpec{4, "L4", 24, "none", ""}},
		{"8:H100:80:mig=0-1:1g.10gb*7,4:3g.40gb+4g.40gb", SimSpec{8, "H100", 80, "nvlink",
			"0:1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb,1:1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb,4:3g.40gb+4g.40gb"}},
		{"2:A100:40:pairs:mig=all:2g.10gb+1g.5gb*2+3g.20gb", SimSpec{2, "A100", 40, "pairs",
			"0:2g.10gb+1g.5gb+1g.5gb+3g.20gb,1:2g.10gb+1g.5gb+1g.5gb+3g.20gb"}},
		{"1:mig=0:7G.80GB", SimSpec{1, "H100", 80, "nvlink", "0:7g.80gb"}},
	}
	for _, tc := range good {
		t.Run("ok/"+tc.in, func(t *testing.T) {
			got, err := ParseSimulateSpec(tc.in)
			if err != nil {
				t.Fatalf("ParseSimulateSpec(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("ParseSimulateSpec(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}

	bad := []struct {
		in, wantErr string
	}{
		{"", "empty value"},
		{"   ", "empty value"},
		{"x", `GPU count "x" is not a whole number`},
		{"2.5", `GPU count "2.5" is not a whole number`},
		{"0", "GPU count must be 1..64, got 0"},
		{"-1", "GPU count must be 1..64, got -1"},
		{"65", "GPU count must be 1..64, got 65"},
		{"8:", "model is empty"},
		{"8:H100:", `memory "" is not a number of GB`},
		{"8:H100:lots", `memory "lots" is not a number of GB`},
		{"8:H100:NaN", `memory "NaN" is not a number of GB`},
		{"8:H100:0", "memory must be 1..1024 GB, got 0"},
		{"8:H100:0.5", "memory must be 1..1024 GB, got 0.5"},
		{"8:H100:2000", "memory must be 1..1024 GB, got 2000"},
		{"8:H100:80:x", `topology "x" is not one of nvlink, pairs, quads, none`},
		{"8:H100:80:pairs:1", "too many fields: 5, at most 4"},
		{"8:H\x01:80", "control characters"},
		{"8:H100:80:mig=0:1g.10gb*7+1g.10gb", "8 compute slices and 8 memory slices, a GPU has 7 and 8"},
		{"8:H100:80:mig=0:1g.10gb*8", `count "8": want 1-7`},
		{"8:H100:80:mig=0:4g.40gb+4g.40gb", "8 compute slices"},
		{"8:H100:80:mig=0:3g.40gb*3", "9 compute slices and 12 memory slices"},
		{"8:H100:80:mig=0:5g.40gb", "a GPU instance has 1, 2, 3, 4 or 7"},
		{"8:H100:80:mig=0:1g.30gb", "30 GB is not 1, 2, 4 or 8 eighths of a 80 GB GPU"},
		{"8:H100:80:mig=0:big", `mig profile "big": want Ng.Mgb`},
		{"8:H100:80:mig=8:1g.10gb", `mig GPUs "8": want an index, a range A-B or all, within 0-7`},
		{"8:H100:80:mig=3-1:1g.10gb", `mig GPUs "3-1"`},
		{"8:H100:80:mig=0:1g.10gb,0-1:1g.10gb", "GPU 0 given two layouts"},
		{"8:H100:80:mig=0", "want GPUS:PROFILES"},
		{"8:H100:80:mig=0:1g.10gb*0", `count "0": want 1-7`},
	}
	for _, tc := range bad {
		t.Run("bad/"+tc.in, func(t *testing.T) {
			_, err := ParseSimulateSpec(tc.in)
			if err == nil {
				t.Fatalf("ParseSimulateSpec(%q): no error", tc.in)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "--simulate-gpus ") || !strings.Contains(msg, tc.wantErr) {
				t.Fatalf("ParseSimulateSpec(%q) error %q, want it to name --simulate-gpus and say %q", tc.in, msg, tc.wantErr)
			}
		})
	}
}

func TestSimSpecStringRoundTrip(t *testing.T) {
	for _, in := range []string{"8:H100:80", "4:A100:40", "2:L4:24.5", "8:H100:80:pairs:mig=0:3g.40gb+4g.40gb,5:7g.80gb"} {
		s, err := ParseSimulateSpec(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.String(); got != in {
			t.Errorf("String() = %q, want %q", got, in)
		}
	}
}
