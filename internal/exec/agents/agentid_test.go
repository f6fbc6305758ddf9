package agents

import (
	"strings"
	"testing"
)

func TestValidAgentID(t *testing.T) {
	tests := map[string]bool{
		"0123456789abcdef":         true,
		"a1b2c3d4e5f6a7b8c9d0e1f2": true,
		"node-1.rack_2.abcdefgh":   true,
		strings.Repeat("a", 128):   true,
		"0123456789abcde":          false, // 15: too short
		strings.Repeat("a", 129):   false,
		"0123456789abcdef/":        false,
		"0123456789 abcdef":        false,
		"0123456789abcdéf":         false,
		"":                         false,
	}
	for id, want := range tests {
		if got := validAgentID(id); got != want {
			t.Errorf("validAgentID(%q) = %v, want %v", id, got, want)
		}
	}
}
