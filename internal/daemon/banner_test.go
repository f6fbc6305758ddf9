package daemon

import (
	"strings"
	"testing"
)

// The banner's suggestions use the name it is given.
func TestBannerUsesSelfName(t *testing.T) {
	b := banner("n1", nil, "no NVML", false, "./corral")
	if !strings.Contains(b, "./corral up --simulate-gpus 8") {
		t.Errorf("banner = %q; want its suggestion to say ./corral", b)
	}
	if strings.Contains(strings.ReplaceAll(b, "./corral", ""), "corral up") {
		t.Errorf("banner = %q; a suggestion still says plain corral", b)
	}
}
