package client

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/shellproto"
)

// ShellOptions is what `corral shell` asks for.
type ShellOptions struct {
	Rank       int      // the gang rank whose node runs the shell (0: the first)
	Command    []string // argv; empty: the account's shell
	TTY        bool     // give the command a PTY of Rows x Cols
	Rows, Cols uint16
	Term       string // $TERM for the PTY
}

// Shell opens a shell in running job id (GET /jobs/{id}/shell) and returns
// its stream of shellproto frames; the caller closes it, which hangs the
// shell up. A refusal (not the owner, job not running, ...) is an
// *api.Error as for other calls.
func (c *Client) Shell(ctx context.Context, id string, o ShellOptions) (net.Conn, error) {
	if c.baseErr != nil {
		return nil, c.baseErr
	}
	p, err := pathID("job", id)
	if err != nil {
		return nil, err
	}
	q := url.Values{"rank": {strconv.Itoa(o.Rank)}, "tty": {strconv.FormatBool(o.TTY)}}
	if o.TTY {
		q.Set("rows", strconv.Itoa(int(o.Rows)))
		q.Set("cols", strconv.Itoa(int(o.Cols)))
		if o.Term != "" {
			q.Set("term", o.Term)
		}
	}
	for _, a := range o.Command {
		q.Add("cmd", a)
	}
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	if c.agent != "" {
		h.Set("User-Agent", c.agent)
	}
	hc := *c.http
	hc.Timeout = 0 // the session lasts as long as the shell
	path := "/jobs/" + p + "/shell"
	ws, resp, err := websocket.Dial(ctx, c.baseNow()+path+"?"+q.Encode(), &websocket.DialOptions{HTTPClient: &hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
			defer resp.Body.Close()
			return nil, decodeError(resp)
		}
		if resp != nil && resp.StatusCode >= 300 {
			return nil, decodeError(resp)
		}
		return nil, c.transportError(ctx, c.baseNow(), request{method: http.MethodGet, path: path}, err)
	}
	ws.SetReadLimit(shellproto.MaxPayload + 1024)
	return websocket.NetConn(context.WithoutCancel(ctx), ws, websocket.MessageBinary), nil
}
