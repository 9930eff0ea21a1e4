package clickhouse

import "testing"

func testEquivalence(t *testing.T, c Conn) {}
