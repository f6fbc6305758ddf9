package deps

// Dependency expressions in Slurm's --dependency grammar:
//
//	afterok:ID[:ID...]     after each job completed (exit code 0)
//	afternotok:ID[:ID...]  after each job ended otherwise (failed, canceled)
//	afterany:ID[:ID...]    after each job ended, however
//	after:ID[:ID...]       after each job started (or was canceled)
//	aftercorr:ID[:ID...]   task i of this array after task i of each array completed
//	singleton              when no other job of the same user and name runs
//
// Terms joined by ',' must all be met; terms joined by '?' need only one.
// One expression uses one of the two, as in Slurm. Parse and String
// read and write the text only; what an id names, and whether a term is
// met, is the Tracker's to say.

import (
	"fmt"
	"strings"
)

// Kind is a term's type, Slurm's name for it.
type Kind string

// The kinds of term.
const (
	After      Kind = "after"
	AfterOK    Kind = "afterok"
	AfterNotOK Kind = "afternotok"
	AfterAny   Kind = "afterany"
	AfterCorr  Kind = "aftercorr"
	Singleton  Kind = "singleton"
)

// kindList names the known kinds, for error messages.
const kindList = "afterok, afternotok, afterany, after, aftercorr, singleton"

// Limits on one expression, so that evaluating it stays cheap.
const (
	MaxIDs   = 1000 // job ids in all terms together
	MaxIDLen = 128
	MaxLen   = 64 << 10
)

// Term is one condition: a kind and the job (or array) ids it is about
// (none for Singleton).
type Term struct {
	Kind Kind
	IDs  []string
}

// Expr is a parsed expression. The zero Expr has no terms: no dependency.
type Expr struct {
	Terms []Term
	// Any: the terms were joined by '?' and one met term is enough;
	// otherwise (',') all must be met.
	Any bool
}

// Empty reports whether e has no terms.
func (e Expr) Empty() bool { return len(e.Terms) == 0 }

// SyntaxError is an expression Parse refuses, saying where: Term is the
// 1-based term it is in (0: the whole expression).
type SyntaxError struct {
	Term int
	Msg  string
}

func (e *SyntaxError) Error() string {
	if e.Term == 0 {
		return e.Msg
	}
	return fmt.Sprintf("term %d: %s", e.Term, e.Msg)
}

// Parse reads an expression. Blank text is the empty Expr. Spaces around
// terms and ids are ignored; kinds are lower case, as in Slurm.
func Parse(s string) (Expr, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Expr{}, nil
	}
	if len(s) > MaxLen {
		return Expr{}, &SyntaxError{Msg: fmt.Sprintf("is longer than %d bytes", MaxLen)}
	}
	all, anyOf := strings.Contains(s, ","), strings.Contains(s, "?")
	if all && anyOf {
		return Expr{}, &SyntaxError{Msg: "mixes ',' (all of) and '?' (any of); use one of them"}
	}
	sep := ","
	if anyOf {
		sep = "?"
	}
	var e Expr
	e.Any = anyOf
	nIDs := 0
	for i, raw := range strings.Split(s, sep) {
		t, err := parseTerm(strings.TrimSpace(raw))
		if err != nil {
			return Expr{}, &SyntaxError{Term: i + 1, Msg: err.Error()}
		}
		if nIDs += len(t.IDs); nIDs > MaxIDs {
			return Expr{}, &SyntaxError{Msg: fmt.Sprintf("names more than %d job ids", MaxIDs)}
		}
		e.Terms = append(e.Terms, t)
	}
	return e, nil
}

// parseTerm reads "kind:ID[:ID...]" or "singleton".
func parseTerm(s string) (Term, error) {
	if s == "" {
		return Term{}, fmt.Errorf("is empty")
	}
	name, rest, hasIDs := strings.Cut(s, ":")
	k, ok := kindOf(strings.TrimSpace(name))
	if !ok {
		return Term{}, fmt.Errorf("%q is not a dependency type (want one of %s)", clip(name), kindList)
	}
	if k == Singleton {
		if hasIDs {
			return Term{}, fmt.Errorf("singleton takes no job ids")
		}
		return Term{Kind: k}, nil
	}
	if !hasIDs {
		return Term{}, fmt.Errorf("%s needs at least one job id (%s:ID[:ID...])", k, k)
	}
	t := Term{Kind: k}
	for _, id := range strings.Split(rest, ":") {
		id = strings.TrimSpace(id)
		if err := checkID(id); err != nil {
			return Term{}, fmt.Errorf("%s: %w", k, err)
		}
		t.IDs = append(t.IDs, id)
	}
	return t, nil
}

// kindOf returns the kind s names.
func kindOf(s string) (Kind, bool) {
	switch k := Kind(s); k {
	case AfterOK, AfterNotOK, AfterAny, After, AfterCorr, Singleton:
		return k, true
	}
	return "", false
}

// checkID accepts what a job or array id, or a prefix of one, may hold.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("an empty job id")
	case len(id) > MaxIDLen:
		return fmt.Errorf("job id %q is longer than %d characters", clip(id), MaxIDLen)
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '+':
			return fmt.Errorf("job id %q: a delay (+time) is not supported", clip(id))
		default:
			return fmt.Errorf("job id %q holds %q (ids are letters, digits, '_' and '-')", clip(id), c)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// String writes e in the grammar Parse reads: Parse(e.String()) is e.
func (e Expr) String() string {
	sep := ","
	if e.Any {
		sep = "?"
	}
	var b strings.Builder
	for i, t := range e.Terms {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(string(t.Kind))
		for _, id := range t.IDs {
			b.WriteByte(':')
			b.WriteString(id)
		}
	}
	return b.String()
}
