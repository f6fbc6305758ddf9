// Package deps is job dependencies: a job's depends_on, in Slurm's
// --dependency grammar (expr.go), and the rules that say when it is met.
package deps
