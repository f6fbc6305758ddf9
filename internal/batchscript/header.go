package batchscript

import (
	"fmt"
	"strings"
)

// MaxScriptSize bounds a batch script's body (the API refuses more).
const MaxScriptSize = 1 << 20

// Header is what a batch script's header says, as corral submit flags.
type Header struct {
	// Corral holds the words of the #CORRAL lines, in order: submit
	// flags as written.
	Corral []string
	// Sbatch holds the #SBATCH options Corral shares with Slurm,
	// translated into submit flags ("--gres=gpu:2" is "--gpus 2").
	Sbatch []string
	// Ignored names the #SBATCH options Corral does not share, as
	// written ("--partition=gpu", "-n 4"), for one warning.
	Ignored []string
}

// ParseHeader reads a script's header: the #CORRAL and #SBATCH lines
// before its first command (as sbatch, it stops at the first line that is
// neither blank nor a comment). Words are split as a shell splits them,
// quotes kept together; a word starting with # ends the line.
func ParseHeader(script string) (Header, error) {
	var h Header
	for n, line := range strings.Split(script, "\n") {
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		if !strings.HasPrefix(t, "#") {
			break
		}
		var dst *[]string
		var rest string
		switch {
		case hasDirective(t, "#CORRAL"):
			dst, rest = &h.Corral, t[len("#CORRAL"):]
		case hasDirective(t, "#SBATCH"):
			rest = t[len("#SBATCH"):]
		default:
			continue
		}
		words, err := splitWords(rest)
		if err != nil {
			return h, fmt.Errorf("line %d: %w", n+1, err)
		}
		if dst != nil {
			*dst = append(*dst, words...)
			continue
		}
		flags, ignored := translate(words)
		h.Sbatch = append(h.Sbatch, flags...)
		h.Ignored = append(h.Ignored, ignored...)
	}
	return h, nil
}

// hasDirective reports whether line starts with directive followed by a
// blank or its end.
func hasDirective(line, directive string) bool {
	rest, ok := strings.CutPrefix(line, directive)
	return ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t')
}

// splitWords splits s as a shell does: blanks separate words, quotes
// ('...' and "...") and backslashes keep characters together; an unquoted
// word starting with # ends the line.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false // in a word
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
				i++
				cur.WriteByte(s[i])
			} else {
				cur.WriteByte(c)
			}
		case c == ' ' || c == '\t' || c == '\r':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#' && !in:
			return words, nil
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// sbatchShort maps sbatch's one-letter options to their long names.
var sbatchShort = map[byte]string{
	'G': "gpus", 'J': "job-name", 't': "time", 'N': "nodes", 'D': "chdir", 'o': "output", 'e': "error",
	'c': "cpus-per-task", 'b': "begin", 'a': "array", 'd': "dependency", 'A': "account", 'p': "partition",
	'n': "ntasks", 'q': "qos", 'C': "constraint", 'w': "nodelist", 'x': "exclude", 'H': "hold", 'W': "wait",
	'Q': "quiet", 'v': "verbose", 'L': "licenses", 'M': "clusters", 'k': "no-kill", 'O': "overcommit",
	's': "oversubscribe", 'S': "core-spec", 'm': "distribution", 'i': "input", 'F': "nodefile", 'B': "extra-node-info",
}

// sbatchNoValue are sbatch options that take no value.
var sbatchNoValue = map[string]bool{
	"exclusive": true, "requeue": true, "no-requeue": true, "hold": true, "wait": true, "parsable": true,
	"overcommit": true, "contiguous": true, "test-only": true, "spread-job": true, "use-min-nodes": true,
	"verbose": true, "quiet": true, "oversubscribe": true, "no-kill": true, "ignore-pbs": true, "exclusive=user": true,
}

// sbatchShared translates the sbatch options Corral shares: the value in,
// submit flags out (ok false: a value Corral cannot take).
var sbatchShared = map[string]func(v string) ([]string, bool){
	"gres":          gres,
	"gpus":          gpus,
	"gpus-per-node": gpus,
	"job-name":      same("-J"),
	"time":          same("-t"),
	"nodes":         same("-N"),
	"chdir":         same("-D"),
	"output":        same("-o"),
	"error":         same("-e"),
	"mem":           same("--mem"),
	"cpus-per-task": same("--cpus"),
	"begin":         same("--begin"),
	"signal":        same("--signal"),
	"array":         same("--array"),
	"dependency":    same("--dependency"),
	"account":       same("--project"),
	"export":        same("--export"),
	"mail-type":     mailType,
}

func same(flag string) func(string) ([]string, bool) {
	return func(v string) ([]string, bool) { return []string{flag, v}, true }
}

// gres reads --gres=gpu[:TYPE][:N][,...]: the gpu entry, others ignored.
func gres(v string) ([]string, bool) {
	for _, g := range strings.Split(v, ",") {
		parts := strings.Split(g, ":")
		if parts[0] != "gpu" {
			continue
		}
		switch len(parts) {
		case 1:
			return []string{"--gpus", "1"}, true
		case 2:
			if isCount(parts[1]) {
				return []string{"--gpus", parts[1]}, true
			}
			return []string{"--gpus", "1", "--gpu-type", parts[1]}, true
		case 3:
			if isCount(parts[2]) {
				return []string{"--gpus", parts[2], "--gpu-type", parts[1]}, true
			}
		}
		return nil, false
	}
	return nil, false
}

// gpus reads --gpus=[TYPE:]N.
func gpus(v string) ([]string, bool) {
	typ, n, ok := strings.Cut(v, ":")
	if !ok {
		return []string{"--gpus", v}, isCount(v)
	}
	return []string{"--gpus", n, "--gpu-type", typ}, isCount(n) && typ != ""
}

func isCount(s string) bool {
	if s == "" || len(s) > 6 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// mailType maps --mail-type to --notify: BEGIN, END, FAIL, REQUEUE
// (preempt), ALL, NONE.
func mailType(v string) ([]string, bool) {
	names := map[string]string{"BEGIN": "begin", "END": "end", "FAIL": "fail", "REQUEUE": "preempt", "ALL": "all", "NONE": "none"}
	var out []string
	for _, t := range strings.Split(strings.ToUpper(v), ",") {
		n, ok := names[strings.TrimSpace(t)]
		if !ok {
			return nil, false
		}
		out = append(out, n)
	}
	return []string{"--notify", strings.Join(out, ",")}, true
}

// translate turns one #SBATCH line's words into submit flags, naming
// what Corral does not share.
func translate(words []string) (flags, ignored []string) {
	for i := 0; i < len(words); i++ {
		w := words[i]
		var name, value string
		hasValue := false
		switch {
		case strings.HasPrefix(w, "--"):
			name, value, hasValue = strings.Cut(w[2:], "=")
		case len(w) >= 2 && w[0] == '-':
			long, ok := sbatchShort[w[1]]
			if !ok {
				ignored = append(ignored, w)
				continue
			}
			name = long
			if len(w) > 2 {
				value, hasValue = strings.TrimPrefix(w[2:], "="), true
			}
		default:
			ignored = append(ignored, w) // a stray word
			continue
		}
		written := w
		if !hasValue && !sbatchNoValue[name] && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
			i++
			value, hasValue = words[i], true
			written += " " + value
		}
		to, shared := sbatchShared[name]
		if !shared || !hasValue {
			ignored = append(ignored, written)
			continue
		}
		f, ok := to(value)
		if !ok {
			ignored = append(ignored, written)
			continue
		}
		flags = append(flags, f...)
	}
	return flags, ignored
}

// ShellCommand is a POSIX shell command that runs script with args (a
// shell string, quoted as the job's command is), for an executor that
// runs a command line and has no file of its own to put the script in
// (Slurm's, Ray's): it writes the script to a private temporary file on
// the node, runs it by its #! line, removes it, and exits as it did.
func ShellCommand(script, args string) string {
	eof := "CORRAL_SCRIPT_EOF"
	for strings.Contains(script, eof) {
		eof += "_X"
	}
	if !strings.HasSuffix(script, "\n") {
		script += "\n"
	}
	return "f=$(mktemp \"${TMPDIR:-/tmp}/corral-script.XXXXXX\") || exit 1\n" +
		"cat >\"$f\" <<'" + eof + "'\n" + script + eof + "\n" +
		"chmod 700 \"$f\"\n" +
		strings.TrimSpace("\"$f\" "+args) + "\nrc=$?\nrm -f \"$f\"\nexit $rc\n"
}
