package fingerprint

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"slices"
	"strings"
)

// lines keeps every line of the hash until the plan has been read, in
// blocks of blockLen records. A record holds no pointer, so the garbage
// collector never scans the records, however many there are: addresses
// live in the block's arena, and a record holds offsets into it, its kind
// of action, flags and digest. With detail, the block's path digests live
// in one slice the same way. A block, once full, is never copied: the
// lines of a big plan grow without a trail of outgrown arrays, which would
// take the garbage collector's headroom (and the peak memory) to twice
// their size.
type lines struct {
	blocks []block
	n      int
	detail bool
}

// blockLen is how many records a block holds.
const blockLen = 1024

type block struct {
	recs   []record
	arena  []byte
	refs   []pathRef // with detail: the records' path digests, in record order
	refEnd []uint32  // with detail: where each record's refs end
}

type record struct {
	off, n uint32 // the address in the block's arena
	kind   uint8  // index into kindList
	flags  uint8
	digest [32]byte
}

// pathRef is the keyed digest of what a change does at one attribute path.
type pathRef struct {
	name   uint32 // index into the path names
	digest [32]byte
}

const (
	flagImport = 1 << iota
	flagMove
	flagOutput
)

// next is the block the next line goes into.
func (l *lines) next() *block {
	if len(l.blocks) == 0 || len(l.blocks[len(l.blocks)-1].recs) == blockLen {
		var b block
		if n := len(l.blocks); n > 0 {
			// A plan with more than one block is a big one. Its addresses
			// are about as long as the last block's: an arena an eighth
			// larger than that one's is mostly filled without growing.
			b.recs = make([]record, 0, blockLen)
			b.arena = make([]byte, 0, len(l.blocks[n-1].arena)+len(l.blocks[n-1].arena)/8)
		}
		l.blocks = append(l.blocks, b)
	}
	return &l.blocks[len(l.blocks)-1]
}

// add keeps a line. With detail, the refs added to l.next() since the
// previous line are this line's.
func (l *lines) add(address []byte, kind, flags uint8, digest [32]byte) {
	b := l.next()
	b.recs = append(b.recs, record{off: uint32(len(b.arena)), n: uint32(len(address)), kind: kind, flags: flags, digest: digest})
	b.arena = append(b.arena, address...)
	if l.detail {
		b.refEnd = append(b.refEnd, uint32(len(b.refs)))
	}
	l.n++
}

// rec returns record i.
func (l *lines) rec(i int32) *record {
	return &l.blocks[i/blockLen].recs[i%blockLen]
}

// refsOf returns the path digests of record i.
func (l *lines) refsOf(i int32) []pathRef {
	if !l.detail {
		return nil
	}
	b, j := &l.blocks[i/blockLen], i%blockLen
	var start uint32
	if j > 0 {
		start = b.refEnd[j-1]
	}
	return b.refs[start:b.refEnd[j]]
}

func (l *lines) address(i int32) []byte {
	b := &l.blocks[i/blockLen]
	r := &b.recs[i%blockLen]
	return b.arena[r.off : r.off+r.n]
}

// labels renders what a report entry shows in parentheses: the action,
// then import, then move.
func (l *lines) labels(i int32) string {
	r := l.rec(i)
	return labelTable[r.kind][r.flags&(flagImport|flagMove)]
}

var labelTable = func() (t [][4]string) {
	t = make([][4]string, len(kindList))
	for k, kind := range kindList {
		for f := range 4 {
			var parts []string
			if kind.label != "" {
				parts = append(parts, kind.label)
			}
			if f&flagImport != 0 {
				parts = append(parts, "import")
			}
			if f&flagMove != 0 {
				parts = append(parts, "move")
			}
			t[k][f] = strings.Join(parts, ", ")
		}
	}
	return t
}()

// sorted returns the record indices in the order of their lines. Terraform
// writes resource changes sorted by address, so the usual plan is checked,
// not sorted.
func (l *lines) sorted() []int32 {
	order := make([]int32, l.n)
	for i := range order {
		order[i] = int32(i)
	}
	if !slices.IsSortedFunc(order, l.compare) {
		slices.SortFunc(order, l.compare)
	}
	return order
}

// sortByAddress sorts record indices by address, keeping the order of
// records at one address. Line order is address order but for addresses
// holding bytes below ' ', so this is mostly a check.
func (l *lines) sortByAddress(order []int32) {
	byAddress := func(a, b int32) int { return bytes.Compare(l.address(a), l.address(b)) }
	if !slices.IsSortedFunc(order, byAddress) {
		slices.SortStableFunc(order, byAddress)
	}
}

// compare orders two records as their lines "<address> <actions> <digest>"
// sort, byte by byte, without building the lines.
func (l *lines) compare(i, j int32) int {
	a, b := l.address(i), l.address(j)
	if !bytes.Equal(a, b) {
		// Where one address is a prefix of the other, the shorter one's
		// line continues with a space.
		n := min(len(a), len(b))
		if c := bytes.Compare(a[:n], b[:n]); c != 0 {
			return c
		}
		if len(a) < len(b) {
			return cmp.Compare(' ', b[n])
		}
		return cmp.Compare(a[n], ' ')
	}
	ri, rj := l.rec(i), l.rec(j)
	if ri.kind != rj.kind {
		// No action list is a prefix of another followed by a byte below
		// ' ' (the next byte is ','), so plain comparison is line order.
		return strings.Compare(kindList[ri.kind].actions, kindList[rj.kind].actions)
	}
	// Hex digits keep the order of the bytes they encode.
	return bytes.Compare(ri.digest[:], rj.digest[:])
}

// appendLine writes the line of record i.
func (l *lines) appendLine(dst []byte, i int32) []byte {
	r := l.rec(i)
	dst = append(dst, l.address(i)...)
	dst = append(dst, ' ')
	dst = append(dst, kindList[r.kind].actions...)
	dst = append(dst, ' ')
	return hex.AppendEncode(dst, r.digest[:])
}
