package agent

import (
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/corral-sched/corral/internal/shellproto"
)

// BenchmarkPortRoundTrip is one byte to a loopback echo server and back:
// dialed directly (the baseline), through the hub to the in-process node,
// and through the tunnel of a remote agent (two WebSocket hops).
func BenchmarkPortRoundTrip(b *testing.B) {
	e := newTunnelEnv(b)
	port := echoServer(b)
	dial := map[string]func() (net.Conn, error){
		"direct": func() (net.Conn, error) { return net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)) },
		"local": func() (net.Conn, error) {
			return e.open(b, "local", shellproto.Request{Kind: shellproto.KindPort, JobID: "j1", Port: port})
		},
		"tunnel": func() (net.Conn, error) {
			return e.open(b, "far", shellproto.Request{Kind: shellproto.KindPort, JobID: "j1", Port: port})
		},
	}
	for _, name := range []string{"direct", "local", "tunnel"} {
		b.Run(name, func(b *testing.B) {
			c, err := dial[name]()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := []byte{'x'}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShellOpen is a whole shell session of `true`: open, run, exit
// code back; in process and through the tunnel.
func BenchmarkShellOpen(b *testing.B) {
	e := newTunnelEnv(b)
	for _, node := range []string{"local", "far"} {
		b.Run(node, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c, err := e.open(b, node, shellproto.Request{Kind: shellproto.KindShell, JobID: "j1", Command: []string{"true"}})
				if err != nil {
					b.Fatal(err)
				}
				shellproto.NewWriter(c).Write(shellproto.EOF, nil)
				for {
					f, err := shellproto.Read(c)
					if err != nil {
						b.Fatal(err)
					}
					if f.Type == shellproto.Exit {
						break
					}
				}
				c.Close()
			}
		})
	}
}
