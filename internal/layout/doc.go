// Package layout holds no code: its test checks which way the imports of
// Corral's packages point (docs/architecture.md, "Where things live").
package layout
