//go:build linux

package web

// NeedBrowser is needBrowser for the external test package (the report's
// browser test imports internal/bench/report, which imports this package).
var NeedBrowser = needBrowser
