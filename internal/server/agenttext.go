package server

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/corral-sched/corral/internal/api"
)

// checkRegistrationText refuses the free text of a registration that no
// honest agent sends and that would reach other people: control characters
// (an escape sequence in a hostname or GPU model would drive the terminal
// of whoever runs corral nodes), an address that is not a host name or an
// IP address (it becomes CORRAL_MASTER_ADDR in other nodes' jobs, where a
// "host; rm -rf ~" would land in scripts), and labels a job could never ask
// for (an empty name, or one with '=': node_labels refuses those). Each
// refusal is 422 naming the field.
func checkRegistrationText(reg api.AgentRegistration) error {
	if field, s := firstControl(reg); field != "" {
		return api.Invalid(field, "%q holds a control character", truncate(s, 40))
	}
	if reg.Address != "" && !validAddress(reg.Address) {
		return api.Invalid("address", "%q is not a host name or an IP address (letters, digits, '.', '-', '_', ':', '[', ']', '%%')", truncate(reg.Address, 40))
	}
	keys := make([]string, 0, len(reg.Labels))
	for k := range reg.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || strings.ContainsRune(k, '=') {
			return api.Invalid("labels", "%q is not a valid label name (not empty, no '=')", truncate(k, 40))
		}
	}
	return nil
}

// firstControl names the first field of reg whose text holds a control
// character, with that text; "" when none does.
func firstControl(reg api.AgentRegistration) (field, text string) {
	check := []struct{ field, s string }{
		{"hostname", reg.Hostname}, {"address", reg.Address}, {"version", reg.Version},
	}
	for i, g := range reg.GPUs {
		check = append(check,
			struct{ field, s string }{fmt.Sprintf("gpus[%d].uuid", i), g.UUID},
			struct{ field, s string }{fmt.Sprintf("gpus[%d].model", i), g.Model})
		if g.MIG != nil {
			for _, d := range g.MIG.Devices {
				check = append(check,
					struct{ field, s string }{fmt.Sprintf("gpus[%d].mig", i), d.UUID},
					struct{ field, s string }{fmt.Sprintf("gpus[%d].mig", i), d.Profile})
			}
		}
	}
	for k, v := range reg.Labels {
		check = append(check, struct{ field, s string }{"labels", k}, struct{ field, s string }{"labels." + k, v})
	}
	for _, c := range check {
		if strings.IndexFunc(c.s, unicode.IsControl) >= 0 {
			if c.field == "labels" || strings.HasPrefix(c.field, "labels.") {
				return "labels", c.s
			}
			return c.field, c.s
		}
	}
	return "", ""
}

// validAddress reports whether s looks like a host name or an IP address
// (IPv6 in brackets or not, with a zone).
func validAddress(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune(".-_:[]%", r):
		default:
			return false
		}
	}
	return true
}
