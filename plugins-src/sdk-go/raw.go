package plugin

// Raw: a lazy view of one msgpack value.
//
// A Raw holds bytes that begin with one msgpack value. Nothing is decoded up front: Get scans a
// map's keys and steps over the values in between without decoding them (strings by their
// length, containers by counting their items, iteratively: no recursion, no allocation), Str
// checks UTF-8 only for the string it returns, and Value decodes a subtree when a plugin wants
// one.
//
// What is checked when:
//
//   - When a Raw is made ([NewRaw], or [DecodeRequest] for the whole request), one pass over
//     the headers checks the framing: every length lies inside the bytes, nothing trails, and
//     there is no bin, ext or 0xc1 anywhere. Navigation therefore never fails and never reads
//     out of bounds afterwards.
//   - Only when read or decoded: UTF-8 (Str reports false for a string that is not UTF-8), map
//     keys being strings (a key that is not a string matches no Get), floats being finite, and
//     the nesting limit MaxDepth (navigation is iterative and needs none; Value checks it, with
//     every other rule of [Decode]).
//   - Repeated keys: request maps never repeat a key (the host encodes Python dicts), so Get
//     returns the first match; Entries yields entries as they are on the wire; Value merges
//     repeats as a Python dict does.

import (
	"math"
	"unicode/utf8"
)

// Kind is the type of a [Raw] value (the JSON-shaped subset: bin and ext never pass the
// checks).
type Kind uint8

const (
	KindNil Kind = iota
	KindBool
	KindInt // an integer, signed or unsigned, of any width
	KindFloat
	KindStr
	KindArray
	KindMap
)

var kindNames = [...]string{"nil", "bool", "int", "float", "str", "array", "map"}

// String is the name used in messages, as [TypeName] gives it.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Raw is one msgpack value, undecoded; see the comment at the top of raw.go. The zero Raw is
// nil. Copy it freely: it is a slice header.
type Raw struct {
	// Begins with exactly one value whose framing has been checked; may go on past it.
	b []byte
}

var nilBytes = []byte{0xc0}

// RawNil is the nil value (what [Request.Pod] gives when a request has no Pod).
var RawNil = Raw{nilBytes}

// NewRaw checks that b holds exactly one value (framing only, one pass, no allocation).
func NewRaw(b []byte) (Raw, error) {
	if end, ok := skip(b, 0); ok && end == len(b) {
		return Raw{b}, nil
	}
	return Raw{}, diagnose(b)
}

// diagnose says why b is not exactly one well-framed value (the slow path: the decoder says).
func diagnose(b []byte) error {
	if _, err := Decode(b); err != nil {
		return err
	}
	return &DecodeError{Offset: 0, Message: "malformed msgpack"}
}

func (r Raw) bytes() []byte {
	if len(r.b) == 0 {
		return nilBytes
	}
	return r.b
}

// Bytes is the msgpack encoding of this value (finding its end steps over it).
func (r Raw) Bytes() []byte {
	b := r.bytes()
	end, ok := skip(b, 0)
	if !ok {
		return b
	}
	return b[:end]
}

// head reads a value's header: its kind and, by kind, its integer (i, or u above MaxInt64),
// float, or size (string bytes, array items, map entries).
type head struct {
	kind Kind
	b    bool
	i    int64
	u    uint64
	big  bool // the integer is u, above MaxInt64
	f    float64
	n    int
}

func (r Raw) head() head {
	b := r.bytes()
	tag := b[0]
	switch {
	case tag <= 0x7f:
		return head{kind: KindInt, i: int64(tag)}
	case tag <= 0x8f:
		return head{kind: KindMap, n: int(tag & 0x0f)}
	case tag <= 0x9f:
		return head{kind: KindArray, n: int(tag & 0x0f)}
	case tag <= 0xbf:
		return head{kind: KindStr, n: int(tag & 0x1f)}
	case tag >= 0xe0:
		return head{kind: KindInt, i: int64(int8(tag))}
	}
	switch tag {
	case 0xc2, 0xc3:
		return head{kind: KindBool, b: tag == 0xc3}
	case 0xca:
		return head{kind: KindFloat, f: float64(math.Float32frombits(uint32(be(b, 1, 4))))}
	case 0xcb:
		return head{kind: KindFloat, f: math.Float64frombits(be(b, 1, 8))}
	case 0xcc, 0xcd, 0xce, 0xcf:
		u := be(b, 1, 1<<(tag-0xcc))
		if u > maxInt64 {
			return head{kind: KindInt, u: u, big: true}
		}
		return head{kind: KindInt, i: int64(u)}
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (tag - 0xd0)
		shift := uint(64 - 8*n)
		return head{kind: KindInt, i: int64(be(b, 1, n)<<shift) >> shift}
	case 0xd9, 0xda, 0xdb:
		return head{kind: KindStr, n: lengthOf(be(b, 1, 1<<(tag-0xd9)))}
	case 0xdc, 0xdd:
		return head{kind: KindArray, n: lengthOf(be(b, 1, 2<<(tag-0xdc)))}
	case 0xde, 0xdf:
		return head{kind: KindMap, n: lengthOf(be(b, 1, 2<<(tag-0xde)))}
	}
	return head{kind: KindNil} // nil; bin, ext and 0xc1 never pass the checks
}

// Kind is what this value is.
func (r Raw) Kind() Kind {
	tag := r.bytes()[0]
	switch { // the common cases without decoding the header
	case tag-0xa0 < 0x20:
		return KindStr
	case tag&0xf0 == 0x80:
		return KindMap
	case tag&0xf0 == 0x90:
		return KindArray
	}
	return r.head().kind
}

// TypeName is "nil", "bool", "int", "float", "str", "array" or "map".
func (r Raw) TypeName() string { return r.Kind().String() }

// IsNil reports whether this is nil.
func (r Raw) IsNil() bool { return r.bytes()[0] == 0xc0 }

// Bool is the value of a bool.
func (r Raw) Bool() (bool, bool) {
	h := r.head()
	return h.b, h.kind == KindBool
}

// Int is the value of an integer that fits an int64.
func (r Raw) Int() (int64, bool) {
	h := r.head()
	return h.i, h.kind == KindInt && !h.big
}

// Uint is the value of a non-negative integer.
func (r Raw) Uint() (uint64, bool) {
	h := r.head()
	switch {
	case h.kind != KindInt:
		return 0, false
	case h.big:
		return h.u, true
	}
	return uint64(h.i), h.i >= 0
}

// Float is the value of a finite float (not of an integer).
func (r Raw) Float() (float64, bool) {
	h := r.head()
	ok := h.kind == KindFloat && !math.IsNaN(h.f) && !math.IsInf(h.f, 0)
	return h.f, ok
}

// Str is the value of a string; false when this is not a string or its bytes are not valid
// UTF-8 (checked now, for this string only).
func (r Raw) Str() (string, bool) {
	b, ok := r.StrBytes()
	if !ok || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// StrBytes is the bytes of a string, UTF-8 unchecked (compare them with a name's bytes to
// match it without checking UTF-8). They belong to the request: do not change them.
func (r Raw) StrBytes() ([]byte, bool) {
	b := r.bytes()
	start, end, ok := strAt(b, 0)
	if !ok {
		return nil, false
	}
	return b[start:end:end], true
}

// Len is the number of items of an array, entries of a map or bytes of a string; 0 for
// anything else.
func (r Raw) Len() int {
	h := r.head()
	switch h.kind {
	case KindStr, KindArray, KindMap:
		return h.n
	}
	return 0
}

// Truthy is Python's truthiness, as [Truthy].
func (r Raw) Truthy() bool {
	h := r.head()
	switch h.kind {
	case KindBool:
		return h.b
	case KindInt:
		return h.big || h.i != 0
	case KindFloat:
		return h.f != 0
	case KindStr, KindArray, KindMap:
		return h.n != 0
	}
	return false
}

// Get is the value of key when this is a map holding it (like Python's dict.get); false for a
// missing key or when this is not a map. It scans the keys in order and stops at the first
// match, stepping over the values before it. To read several keys of a big map, one Entries
// pass is cheaper than several Gets.
func (r Raw) Get(key string) (Raw, bool) {
	b := r.bytes()
	pos, n, ok := containerAt(b, true)
	if !ok {
		return Raw{}, false
	}
	for i := 0; i < n; i++ {
		value := 0
		if start, end, ok := strAt(b, pos); ok {
			if string(b[start:end]) == key {
				return Raw{b[end:]}, true
			}
			value = end
		} else if value, ok = skip(b, pos); !ok { // a key that is not a string matches nothing
			return Raw{}, false
		}
		if pos, ok = skip(b, value); !ok {
			return Raw{}, false
		}
	}
	return Raw{}, false
}

// Path follows keys through nested maps: r.Path("metadata", "name").
func (r Raw) Path(keys ...string) (Raw, bool) {
	for _, k := range keys {
		var ok bool
		if r, ok = r.Get(k); !ok {
			return Raw{}, false
		}
	}
	return r, true
}

// Item is item i of an array (false when out of range or not an array).
func (r Raw) Item(i int) (Raw, bool) {
	it := r.Items()
	for j := 0; it.Next(); j++ {
		if j == i {
			return it.Value(), true
		}
	}
	return Raw{}, false
}

// Items iterates over the items of an array, in order (nothing when this is not an array):
//
//	for it := raw.Items(); it.Next(); { item := it.Value() }
//
// An item is stepped over only when the next one is asked for.
func (r Raw) Items() ArrayIter {
	b := r.bytes()
	pos, n, ok := containerAt(b, false)
	if !ok {
		return ArrayIter{}
	}
	return ArrayIter{b: b, pos: pos, left: n}
}

// Entries iterates over the entries of a map in wire order (nothing when this is not a map):
//
//	for it := raw.Entries(); it.Next(); { k, v := it.Key(), it.Value() }
//
// Keys are strings in a request; read them with Str, or compare StrBytes.
func (r Raw) Entries() MapIter {
	b := r.bytes()
	pos, n, ok := containerAt(b, true)
	if !ok {
		return MapIter{}
	}
	return MapIter{items: ArrayIter{b: b, pos: pos, left: 2 * n}}
}

// Value decodes this value with every check of [Decode] (UTF-8 of every string, string keys,
// finite floats, nesting at most MaxDepth deep; repeated keys merged as a Python dict does).
// Error offsets count from the start of this value.
func (r Raw) Value() (Value, error) {
	return Decode(r.Bytes())
}

// ArrayIter iterates over the items of an array; see [Raw.Items].
type ArrayIter struct {
	b       []byte
	pos     int // where the next item starts, or (pending) where the current one starts
	left    int
	pending bool
}

// Next moves to the next item; false when there is none.
func (it *ArrayIter) Next() bool {
	if it.left <= 0 {
		return false
	}
	if it.pending {
		end, ok := skip(it.b, it.pos)
		if !ok {
			it.left = 0 // never: the bytes were checked
			return false
		}
		it.pos = end
	}
	if it.pos >= len(it.b) {
		it.left = 0 // never: the bytes were checked
		return false
	}
	it.left--
	it.pending = true
	return true
}

// Value is the current item.
func (it *ArrayIter) Value() Raw { return Raw{it.b[it.pos:]} }

// MapIter iterates over the entries of a map; see [Raw.Entries].
type MapIter struct {
	items      ArrayIter // keys and values, alternating
	key, value Raw
}

// Next moves to the next entry; false when there is none.
func (it *MapIter) Next() bool {
	if !it.items.Next() {
		return false
	}
	it.key = it.items.Value()
	if !it.items.Next() {
		return false
	}
	it.value = it.items.Value()
	return true
}

// Key is the current entry's key.
func (it *MapIter) Key() Raw { return it.key }

// Value is the current entry's value.
func (it *MapIter) Value() Raw { return it.value }

// be is the big-endian unsigned integer of n bytes at at; 0 when out of range (never, for
// checked bytes).
func be(b []byte, at, n int) uint64 {
	if at+n > len(b) {
		return 0
	}
	var u uint64
	for _, c := range b[at : at+n] {
		u = u<<8 | uint64(c)
	}
	return u
}

// containerAt is where the entries (isMap) or items start and how many there are, when b
// begins with a map (isMap) or an array.
func containerAt(b []byte, isMap bool) (start, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	tag := b[0]
	fix, size16, size32 := byte(0x90), byte(0xdc), byte(0xdd)
	if isMap {
		fix, size16, size32 = 0x80, 0xde, 0xdf
	}
	switch {
	case tag&0xf0 == fix:
		return 1, int(tag & 0x0f), true
	case tag == size16 && len(b) >= 3:
		return 3, int(be(b, 1, 2)), true
	case tag == size32 && len(b) >= 5:
		return 5, lengthOf(be(b, 1, 4)), true
	}
	return 0, 0, false
}

// strAt is where the bytes of the string at pos start and end, when it is a string whose
// bytes are all there.
func strAt(b []byte, pos int) (start, end int, ok bool) {
	if pos >= len(b) {
		return 0, 0, false
	}
	tag := b[pos]
	var n int
	switch {
	case tag-0xa0 < 0x20:
		start, n = pos+1, int(tag&0x1f)
	case tag == 0xd9 && pos+2 <= len(b):
		start, n = pos+2, int(b[pos+1])
	case tag == 0xda && pos+3 <= len(b):
		start, n = pos+3, int(be(b, pos+1, 2))
	case tag == 0xdb && pos+5 <= len(b):
		start, n = pos+5, lengthOf(be(b, pos+1, 4))
	default:
		return 0, 0, false
	}
	if n > len(b)-start {
		return 0, 0, false
	}
	return start, start + n, true
}

// skip is the offset just past the value at pos, stepping over nested values iteratively (a
// count of values still to step over: no recursion, no allocation); false when the bytes end
// early or a bin, ext or 0xc1 turns up. It never reads out of bounds.
func skip(b []byte, pos int) (int, bool) {
	size := len(b)
	left := 1 // values still to step over; kept <= size-pos, as each takes a byte
	for {
		if pos >= size {
			return 0, false
		}
		tag := b[pos]
		pos++
		left--
		switch {
		case tag-0xa0 < 0x20: // fixstr; an overshoot is caught by the next read or the end
			pos += int(tag & 0x1f)
		case tag < 0x80 || tag >= 0xe0: // positive or negative fixint
		case tag < 0xa0: // fixmap (two values per entry) or fixarray
			n := int(tag & 0x0f)
			if tag < 0x90 {
				n *= 2
			}
			if n > size-pos-left {
				return 0, false
			}
			left += n
		default:
			payload, n := 0, 0 // bytes after the tag, values inside
			switch tag {
			case 0xc0, 0xc2, 0xc3:
			case 0xcc, 0xd0:
				payload = 1
			case 0xcd, 0xd1:
				payload = 2
			case 0xca, 0xce, 0xd2:
				payload = 4
			case 0xcb, 0xcf, 0xd3:
				payload = 8
			case 0xd9, 0xda, 0xdb:
				w := 1 << (tag - 0xd9)
				if w > size-pos {
					return 0, false
				}
				length := lengthOf(be(b, pos, w))
				if length > size-pos-w {
					return 0, false
				}
				payload = w + length
			case 0xdc, 0xdd, 0xde, 0xdf:
				w := 2 << ((tag - 0xdc) & 1)
				if w > size-pos {
					return 0, false
				}
				payload, n = w, lengthOf(be(b, pos, w))
			default: // bin, ext, 0xc1
				return 0, false
			}
			if payload > size-pos {
				return 0, false
			}
			pos += payload
			room := size - pos - left // values that can still fit, one byte each
			if tag >= 0xde {          // map16, map32: two values per entry
				if n > room/2 {
					return 0, false
				}
				n *= 2
			}
			if n > room {
				return 0, false
			}
			left += n
		}
		if left == 0 {
			if pos <= size {
				return pos, true
			}
			return 0, false
		}
	}
}
