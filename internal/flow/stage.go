package flow

import "unsafe"

// stageKeys (stage_amd64.s) hard-codes these layouts: each fails to compile
// if its struct changes.
var (
	_ [unsafe.Sizeof(pending{}) - 48]byte
	_ [48 - unsafe.Sizeof(pending{})]byte
	_ [unsafe.Offsetof(pending{}.h) - 40]byte
	_ [40 - unsafe.Offsetof(pending{}.h)]byte
	_ [unsafe.Offsetof(pending{}.dir) - 44]byte
	_ [44 - unsafe.Offsetof(pending{}.dir)]byte
	_ [unsafe.Offsetof(Key{}.SrcPort) - 32]byte
	_ [32 - unsafe.Offsetof(Key{}.SrcPort)]byte
	_ [unsafe.Offsetof(Key{}.DstPort) - 34]byte
	_ [34 - unsafe.Offsetof(Key{}.DstPort)]byte
	_ [unsafe.Sizeof(slot{}) - 96]byte
	_ [96 - unsafe.Sizeof(slot{})]byte
	_ [-unsafe.Offsetof(Packet{}.Key)]byte // Key first in Packet, and Packet first in Aggregate: stride over either
	_ [-unsafe.Offsetof(Aggregate{}.Packet)]byte
)

// stagePackets is the hash stage for ps into ring[0:len(ps)]: their
// canonical keys, hashes and directions, with each home tag line and home
// slot prefetched.
func (t *Table) stagePackets(ps []Packet, ring *pending) {
	stageKeys(unsafe.Pointer(unsafe.SliceData(ps)), unsafe.Sizeof(Packet{}), len(ps), ring,
		&t.seed, unsafe.SliceData(t.tags), unsafe.SliceData(t.slots), t.n)
}

// stageAggregates is stagePackets for aggregates.
func (t *Table) stageAggregates(as []Aggregate, ring *pending) {
	stageKeys(unsafe.Pointer(unsafe.SliceData(as)), unsafe.Sizeof(Aggregate{}), len(as), ring,
		&t.seed, unsafe.SliceData(t.tags), unsafe.SliceData(t.slots), t.n)
}
