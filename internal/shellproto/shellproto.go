// Package shellproto is the framed protocol of `corral shell`: what flows
// between the CLI, the server and the node agent that runs the shell. It
// is carried over any byte stream (a WebSocket wrapped as a net.Conn, a
// pipe); the server relays the bytes without reading them.
//
// A frame is one type byte, a big-endian uint32 payload length, then the
// payload:
//
//	Data    'd'  bytes for the remote stdin (client to node) or from the
//	             remote stdout, or the PTY (node to client)
//	Stderr  'e'  bytes from the remote stderr (without a PTY only)
//	Resize  'r'  rows uint16, cols uint16: the client's window changed
//	EOF     'z'  (empty) the client's stdin ended
//	Exit    'x'  int32: the remote command's exit code; the last frame
//	Error   '!'  UTF-8 text: why the session failed or ends (e.g. the job
//	             ended); an Exit frame may follow
//	Notice  'n'  UTF-8 text to show the user, the session going on (the
//	             job's preemption notice: it will be stopped soon)
//
// Readers refuse unknown types and payloads over MaxPayload, so a broken
// peer cannot make the other side allocate without bound.
package shellproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Type is a frame's type.
type Type byte

// The frame types.
const (
	Data   Type = 'd'
	Stderr Type = 'e'
	Resize Type = 'r'
	EOF    Type = 'z'
	Exit   Type = 'x'
	Error  Type = '!'
	Notice Type = 'n'
)

// MaxPayload bounds one frame's payload.
const MaxPayload = 1 << 20

// ErrFrame reports a malformed frame.
var ErrFrame = errors.New("shellproto: malformed frame")

// Frame is one message.
type Frame struct {
	Type    Type
	Payload []byte
}

// String describes the frame for logs and tests.
func (f Frame) String() string { return fmt.Sprintf("%c[%d]", f.Type, len(f.Payload)) }

func (t Type) valid() bool {
	switch t {
	case Data, Stderr, Resize, EOF, Exit, Error, Notice:
		return true
	}
	return false
}

// Read reads one frame. At the end of the stream before a frame it
// returns io.EOF; a frame cut short is io.ErrUnexpectedEOF; a malformed
// one wraps ErrFrame.
func Read(r io.Reader) (Frame, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Type: Type(h[0])}
	n := binary.BigEndian.Uint32(h[1:])
	if !f.Type.valid() {
		return Frame{}, fmt.Errorf("%w: unknown type 0x%02x", ErrFrame, h[0])
	}
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: payload of %d bytes, over %d", ErrFrame, n, MaxPayload)
	}
	f.Payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	if err := f.check(); err != nil {
		return Frame{}, err
	}
	return f, nil
}

func (f Frame) check() error {
	switch {
	case f.Type == Resize && len(f.Payload) != 4:
		return fmt.Errorf("%w: resize needs 4 bytes, has %d", ErrFrame, len(f.Payload))
	case f.Type == Exit && len(f.Payload) != 4:
		return fmt.Errorf("%w: exit needs 4 bytes, has %d", ErrFrame, len(f.Payload))
	case f.Type == EOF && len(f.Payload) != 0:
		return fmt.Errorf("%w: eof carries no payload", ErrFrame)
	}
	return nil
}

// Writer writes frames to a stream; its methods may be called from
// several goroutines (each frame is written whole).
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes one frame. Payloads over MaxPayload are split into several
// frames of the same type (only Data and Stderr may be that long).
func (w *Writer) Write(t Type, p []byte) error {
	if !t.valid() {
		return fmt.Errorf("%w: unknown type 0x%02x", ErrFrame, byte(t))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		n := min(len(p), MaxPayload)
		buf := make([]byte, 5+n)
		buf[0] = byte(t)
		binary.BigEndian.PutUint32(buf[1:], uint32(n))
		copy(buf[5:], p[:n])
		if _, err := w.w.Write(buf); err != nil {
			return err
		}
		if p = p[n:]; len(p) == 0 {
			return nil
		}
	}
}

// WriteResize writes a Resize frame.
func (w *Writer) WriteResize(rows, cols uint16) error {
	var b [4]byte
	binary.BigEndian.PutUint16(b[:], rows)
	binary.BigEndian.PutUint16(b[2:], cols)
	return w.Write(Resize, b[:])
}

// WriteExit writes an Exit frame.
func (w *Writer) WriteExit(code int) error {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	return w.Write(Exit, b[:])
}

// Size reads a Resize frame's rows and cols.
func (f Frame) Size() (rows, cols uint16) {
	if f.Type != Resize || len(f.Payload) != 4 {
		return 0, 0
	}
	return binary.BigEndian.Uint16(f.Payload), binary.BigEndian.Uint16(f.Payload[2:])
}

// Code reads an Exit frame's exit code.
func (f Frame) Code() int {
	if f.Type != Exit || len(f.Payload) != 4 {
		return 0
	}
	return int(int32(binary.BigEndian.Uint32(f.Payload)))
}

// Request is what a node is asked to open: a shell in a job's rank, or a
// TCP stream to a loopback port on the job's node. It travels as JSON from
// the server to the node's agent.
type Request struct {
	// Session names the tunnel the agent dials back for this request
	// (remote agents only).
	Session string `json:"session,omitempty"`
	Kind    string `json:"kind"` // KindShell or KindPort
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Rank    int    `json:"rank"`
	// Shell: the command's argv (empty: the account's login shell), and
	// whether to give it a PTY of Rows x Cols.
	Command []string `json:"command,omitempty"`
	TTY     bool     `json:"tty,omitempty"`
	Rows    uint16   `json:"rows,omitempty"`
	Cols    uint16   `json:"cols,omitempty"`
	Term    string   `json:"term,omitempty"` // the client's $TERM, for a PTY
	// Port: the loopback port to connect to.
	Port int `json:"port,omitempty"`
}

// The kinds of Request.
const (
	KindShell = "shell"
	KindPort  = "port"
)
