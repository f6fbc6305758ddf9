package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
)

// The daemons' config file (docs/team.md, "The config file"): `corral up`,
// `corral server` and `corral agent` take --config FILE, a JSON object whose
// keys are the command's long flag names and whose values are what the flag
// takes:
//
//	{"listen": "0.0.0.0:7450", "node-ttl": "30s", "login-from-agents": true,
//	 "max-gpus-per-node": 16, "label": ["rack=r2", "ib=yes"]}
//
// A string, number or boolean is the flag's value as written on the command
// line (a number is its literal); a list gives a repeatable flag (--label)
// one value per element. A flag given on the command line wins over the
// file (a repeatable one's whole list). Keys starting with "//" are
// comments. An unknown key, a value the flag refuses, a list for a flag of
// one value, or anything that is not such an object is an error naming the
// file, the line and the key. There is no default path: a unit file or
// script names its file (deploy/).
//
// It works on the command's own flag set, through pflag's Set, so every
// flag the command has is settable and means the same in the file as on
// the command line, with no list of names to keep in step.

// configFlag is the name of the flag that names the file.
const configFlag = "config"

// withConfigFile gives a daemon command --config FILE: the file's settings
// are applied before the command runs, to the flags the command line left
// alone.
func withConfigFile(cmd *cobra.Command) {
	var path string
	cmd.Flags().StringVar(&path, configFlag, "", "read flags from this JSON file, {\"FLAG\": VALUE, ...} with the long flag names as keys (a list for a repeatable flag); flags on the command line win (docs/team.md)")
	pre := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if path != "" {
			data, err := os.ReadFile(path)
			if err != nil {
				return cmdkit.Usagef("--config: %w", err)
			}
			own := c.LocalFlags()
			settable := func(name string) bool {
				return name != configFlag && name != "help" && own.Lookup(name) != nil
			}
			if err := applyConfig(c.Flags(), settable, path, data); err != nil {
				return cmdkit.Usage(err) // fail adds: Run 'corral server --help' for usage.
			}
		}
		if pre != nil {
			return pre(c, args)
		}
		return nil
	}
}

// applyConfig sets the flags of fs that data (the config file named name)
// sets, but for those already changed (given on the command line). settable
// says which names the file may set. Nothing is set unless the whole file
// is well-formed and every key names a settable flag; a value a flag
// refuses stops at that key.
func applyConfig(fs *pflag.FlagSet, settable func(string) bool, name string, data []byte) error {
	entries, err := readConfig(name, data)
	if err != nil {
		return err
	}
	for _, e := range entries {
		f := fs.Lookup(e.key)
		if f == nil || !settable(e.key) {
			return e.errorf("%q is not a flag of this command", e.key)
		}
		if len(e.values) != 1 && !repeatable(f) {
			return e.errorf("%q takes one value, not a list: want %s", e.key, expected(f))
		}
	}
	for _, e := range entries {
		if fs.Changed(e.key) {
			continue // the command line wins
		}
		for _, v := range e.values {
			if err := fs.Set(e.key, v); err != nil {
				var ive *pflag.InvalidValueError
				if errors.As(err, &ive) {
					err = ive.Unwrap()
				}
				return e.errorf("%q: %s is not a valid value of --%s (want %s): %w", e.key, e.raw, e.key, expected(fs.Lookup(e.key)), err)
			}
		}
	}
	return nil
}

// configEntry is one key of a config file with its values as they would
// be written on the command line.
type configEntry struct {
	file   string
	line   int
	key    string
	raw    string   // the value as written in the file, for messages
	values []string // one per flag occurrence
}

func (e configEntry) errorf(format string, args ...any) error {
	return fmt.Errorf("config file %s, line %d: %w", e.file, e.line, fmt.Errorf(format, args...))
}

// readConfig reads a config file: one JSON object of scalars and lists of
// scalars, keys unique. Comment keys ("//...") are dropped.
func readConfig(name string, data []byte) ([]configEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	fail := func(off int64, format string, args ...any) error {
		return fmt.Errorf("config file %s, line %d: %s", name, lineAt(data, off), fmt.Sprintf(format, args...))
	}
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fail(se.Offset, "not valid JSON: %v", se)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fail(int64(len(data)), "not valid JSON: the file ends early")
		}
		return fmt.Errorf("config file %s: %w", name, err)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fail(dec.InputOffset(), `want a JSON object of flags, {"FLAG": VALUE, ...}`)
	}
	var out []configEntry
	seen := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		key, _ := tok.(string)
		e := configEntry{file: name, line: lineAt(data, dec.InputOffset()), key: key}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, syntax(err)
		}
		if strings.HasPrefix(key, "//") {
			continue
		}
		if first, ok := seen[key]; ok {
			return nil, e.errorf("%q is set twice (first on line %d)", key, first)
		}
		seen[key] = e.line
		e.raw = string(raw)
		if len(e.raw) > 60 {
			e.raw = e.raw[:57] + "..."
		}
		if e.values, err = configValues(raw); err != nil {
			return nil, e.errorf("%q: %w", key, err)
		}
		out = append(out, e)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, syntax(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(dec.InputOffset(), "more after the JSON object")
	}
	return out, nil
}

// configValues turns a value of the file into the command-line values it
// stands for.
func configValues(raw json.RawMessage) ([]string, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if list, ok := v.([]any); ok {
		if len(list) == 0 {
			return nil, errors.New("an empty list sets nothing: leave the key out")
		}
		out := make([]string, 0, len(list))
		for _, x := range list {
			s, err := configScalar(x)
			if err != nil {
				return nil, fmt.Errorf("a list element: %w", err)
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := configScalar(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

func configScalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	case nil:
		return "", errors.New("null is no value: leave the key out for the flag's default")
	default:
		return "", errors.New("want a string, number or boolean (or, for a repeatable flag, a list of them)")
	}
}

// repeatable reports whether a flag may be given more than once, each
// adding a value (--label), as opposed to the last one winning.
func repeatable(f *pflag.Flag) bool {
	if _, ok := f.Value.(pflag.SliceValue); ok {
		return true
	}
	t := f.Value.Type()
	return strings.HasSuffix(t, "Array") || strings.HasSuffix(t, "Slice")
}

// expected says what a flag takes, for an error message.
func expected(f *pflag.Flag) string {
	switch t := f.Value.Type(); t {
	case "bool":
		return "true or false"
	case "duration":
		return `a duration such as "30s", "5m", "2h" or "7d"`
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "size":
		return `a size such as "512MiB" or "1GiB"`
	case "percent":
		return `a percentage such as "5%"`
	case "stringArray", "stringSlice":
		return "a string or a list of strings"
	default:
		if u := strings.TrimSpace(f.Usage); u != "" {
			return fmt.Sprintf("a %s: %s", t, u)
		}
		return "a " + t
	}
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte("\n")) + 1
}
