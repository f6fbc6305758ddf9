// Package web holds Corral's dashboard: plain HTML, CSS and JavaScript,
// embedded in the binary and served at / (see internal/server). Nothing is
// built: there is no Node toolchain and no package from outside, so the
// files under static/ are exactly what the browser gets.
package web

import "embed"

// Static is the dashboard's files: static/index.html and its assets.
//
//go:embed static
var Static embed.FS
