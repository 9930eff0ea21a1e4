//go:build race

package query

// raceEnabled: the race detector slows tests ~10x; the big ones shrink.
const raceEnabled = true
