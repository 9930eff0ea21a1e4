//go:build race

package store

// raceEnabled: sync.Pool drops items at random under -race, so allocation
// counts are not checked.
const raceEnabled = true
