// Package lazyre holds regular expressions compiled on first use.
//
// Every package-level regexp.MustCompile runs when the binary starts, for
// every command: a `corral submit` paid for the server's and the agent's
// patterns before main. A lazyre.Regexp declared at package level costs a
// closure at start-up; the pattern is compiled once, the first time it is
// used, safely from any goroutine.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on first use. Its methods are
// those of regexp.Regexp that Corral uses; Re returns the compiled one for
// the rest.
type Regexp struct {
	re func() *regexp.Regexp
}

// New returns expr, to be compiled (with regexp.MustCompile: a bad
// pattern panics at its first use) when first used.
func New(expr string) *Regexp {
	return &Regexp{re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// Re returns the compiled expression.
func (r *Regexp) Re() *regexp.Regexp { return r.re() }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindAllStringSubmatch is regexp.Regexp.FindAllStringSubmatch.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.re().FindAllStringSubmatch(s, n)
}
