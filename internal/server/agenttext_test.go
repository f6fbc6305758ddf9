package server

import (
	"strings"
	"testing"
)

// A registration's free text that would reach other people's terminals or
// jobs is refused, 422 naming the field, and makes no node; an honest one
// (IPv4, IPv6, a host name, plain labels) passes.
func TestAgentRegistrationTextRefused(t *testing.T) {
	ts, _ := newAgentServer(t)
	reg := func(extra string) string {
		return `{"node_id":"n4","agent_id":"agent-n4-0123456789","tasks":[],` + extra + `}`
	}
	const gpu = `"gpus":[{"index":0,"uuid":"GPU-a","model":"H100","memory_mib":1}]`
	cases := map[string]struct {
		body  string
		field string
	}{
		"escape in hostname":    {reg(`"hostname":"\u001b]0;pwned\u0007",` + gpu), "hostname"},
		"C1 CSI in hostname":    {reg(`"hostname":"a\u009b2J",` + gpu), "hostname"},
		"escape in GPU model":   {reg(`"hostname":"h","gpus":[{"index":0,"uuid":"GPU-a","model":"\u001b[2J","memory_mib":1}]`), "gpus[0].model"},
		"newline in GPU uuid":   {reg(`"hostname":"h","gpus":[{"index":0,"uuid":"GPU\na","model":"m","memory_mib":1}]`), "gpus[0].uuid"},
		"escape in MIG profile": {reg(`"hostname":"h","gpus":[{"index":0,"uuid":"GPU-a","model":"m","memory_mib":1,"mig":{"mode":"enabled","devices":[{"uuid":"MIG-a","profile":"\u001b[2J"}]}}]`), "gpus[0].mig"},
		"escape in version":     {reg(`"hostname":"h","version":"\u001b[2J",` + gpu), "version"},
		"escape in label":       {reg(`"hostname":"h","labels":{"rack":"\u001b[2J"},` + gpu), "labels"},
		"empty label name":      {reg(`"hostname":"h","labels":{"":"x"},` + gpu), "labels"},
		"label name with =":     {reg(`"hostname":"h","labels":{"a=b":"x"},` + gpu), "labels"},
		"shell in address":      {reg(`"hostname":"h","address":"10.0.0.1; rm -rf ~",` + gpu), "address"},
		"space in address":      {reg(`"hostname":"h","address":"10.0.0.1 x",` + gpu), "address"},
		"subshell in address":   {reg(`"hostname":"h","address":"$(id)",` + gpu), "address"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, e, b := agentCall(t, ts, "/agent/v1/register", "", tc.body)
			if status != 422 || e.Field != tc.field || strings.Contains(string(b), "session") {
				t.Fatalf("%d %s; want 422 naming %q", status, b, tc.field)
			}
		})
	}
	if status, _, b := agentCall(t, ts, "/agent/v1/sync", "", `{"node_id":"n4","tasks":[]}`); status != 409 {
		t.Fatalf("a node whose registrations were all refused: sync %d %s; want 409 unknown_node", status, b)
	}
	for i, addr := range []string{"10.0.0.7", "fe80::1%eth0", "[2001:db8::1]", "gpu-07.rack_2.example.org"} {
		body := `{"node_id":"ok` + string(rune('a'+i)) + `","agent_id":"agent-ok-0123456789` + string(rune('a'+i)) + `","tasks":[],"hostname":"gpu-07","address":"` + addr + `","labels":{"rack":"r2 east"},` + gpu + `}`
		if status, _, b := agentCall(t, ts, "/agent/v1/register", "", body); status != 200 {
			t.Errorf("address %q: %d %s; want 200", addr, status, b)
		}
	}
}
