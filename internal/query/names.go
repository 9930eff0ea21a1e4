package query

import (
	"maps"
	"slices"
)

// GroupAttributes lists the attribute names ParseGroupBy accepts (not the
// presets: see Presets), in the order results show them.
func GroupAttributes() []string { return slices.Clone(attrText[:]) }

// ConditionAttributes lists the attribute names a condition compares, in
// their canonical spelling (aliases such as src or dst_port are accepted
// too; see ConditionAliases).
func ConditionAttributes() []string { return slices.Clone(attrShow[:]) }

// ConditionAliases lists every attribute name a condition accepts,
// canonical names and aliases, sorted: what an editor completes.
func ConditionAliases() []string { return slices.Sorted(maps.Keys(attrNames)) }
