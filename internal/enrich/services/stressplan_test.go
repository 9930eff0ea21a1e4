package services

import (
	"reflect"
	"testing"
)

func TestStressPlan(t *testing.T) {
	ns, modes, err := StressPlan("20, 120,250", "both", 3000, 5)
	if err != nil || !reflect.DeepEqual(ns, []int{20, 120, 250}) || !reflect.DeepEqual(modes, []bool{true, false}) {
		t.Fatalf("got %v %v %v", ns, modes, err)
	}
	for _, c := range []struct {
		nodes, groups string
		lbs, repeat   int
	}{{"0", "on", 1, 1}, {"x", "on", 1, 1}, {"100001", "on", 1, 1}, {"5", "maybe", 1, 1}, {"5", "off", 0, 1}, {"5", "off", 65001, 1}, {"5", "off", 1, 0}} {
		if _, _, err := StressPlan(c.nodes, c.groups, c.lbs, c.repeat); err == nil {
			t.Errorf("StressPlan(%+v) accepted", c)
		}
	}
}
