//go:build !linux

package netdev

import "testing"

// liveDatagrams has no netlink to read from here.
func liveDatagrams(testing.TB) [][]byte { return nil }
