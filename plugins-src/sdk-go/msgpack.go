package plugin

// The msgpack codec of the ABI, written out by hand (no reflection).
//
// The encoder gives the bytes of Python's msgpack.packb(obj, use_bin_type=True), the host's
// encoder: the smallest integer format (positive fixint, uint8..uint64 for non-negative
// numbers; negative fixint, int8..int64 for negative ones), floats always as float64, fixstr /
// str8 / str16 / str32, fixarray / array16 / array32, fixmap / map16 / map32, and map entries
// in the order given.
//
// The decoder accepts only the JSON-shaped subset: nil, bool, int, float, str, array and maps
// with string keys, nested at most MaxDepth deep. It refuses bin, ext, non-string map keys,
// invalid UTF-8, NaN and infinities, and trailing bytes. A key repeated in one map keeps its
// first position and its last value, as in the Python dict the host would decode.

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest container nesting the decoder accepts (the outermost map or array is
// level 1).
const MaxDepth = 128

// DecodeError says why bytes could not be decoded, and where.
type DecodeError struct {
	Offset  int // byte offset where the problem was found
	Message string
}

func (e *DecodeError) Error() string {
	return "invalid msgpack at byte " + strconv.Itoa(e.Offset) + ": " + e.Message
}

// Encode returns the msgpack encoding of v (see [Value] for the Go types it takes). It panics
// on any other Go type: that is a programming error, like an out-of-range index.
func Encode(v Value) []byte {
	return AppendValue(nil, v)
}

// AppendValue appends the msgpack encoding of v to dst.
func AppendValue(dst []byte, v Value) []byte {
	if i, ok := asInt64(v); ok {
		return AppendInt(dst, i)
	}
	switch x := v.(type) {
	case nil:
		return append(dst, 0xc0)
	case bool:
		return AppendBool(dst, x)
	case uint64:
		return AppendUint(dst, x)
	case uint:
		return AppendUint(dst, uint64(x))
	case float32:
		return AppendFloat(dst, float64(x))
	case float64:
		return AppendFloat(dst, x)
	case string:
		return AppendString(dst, x)
	case []Value:
		dst = AppendArrayHeader(dst, len(x))
		for _, item := range x {
			dst = AppendValue(dst, item)
		}
		return dst
	case []string:
		dst = AppendArrayHeader(dst, len(x))
		for _, s := range x {
			dst = AppendString(dst, s)
		}
		return dst
	case []Map:
		dst = AppendArrayHeader(dst, len(x))
		for _, m := range x {
			dst = AppendValue(dst, m)
		}
		return dst
	case Map:
		dst = AppendMapHeader(dst, len(x))
		for _, e := range x {
			dst = AppendString(dst, e.Key)
			dst = AppendValue(dst, e.Value)
		}
		return dst
	}
	panic("plugin: cannot encode this Go type as msgpack (use nil, bool, integers, floats, string, []Value, []string, []Map or Map)")
}

// AppendNil appends msgpack nil.
func AppendNil(dst []byte) []byte { return append(dst, 0xc0) }

// AppendBool appends a msgpack bool.
func AppendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 0xc3)
	}
	return append(dst, 0xc2)
}

// AppendInt appends an integer in the smallest format Python's msgpack picks.
func AppendInt(dst []byte, i int64) []byte {
	switch {
	case i >= 0:
		return AppendUint(dst, uint64(i))
	case i >= -32:
		return append(dst, byte(i))
	case i >= -128:
		return append(dst, 0xd0, byte(i))
	case i >= -32768:
		return append(dst, 0xd1, byte(i>>8), byte(i))
	case i >= -(1 << 31):
		return appendBE(append(dst, 0xd2), uint64(i), 4)
	}
	return appendBE(append(dst, 0xd3), uint64(i), 8)
}

// AppendUint appends a non-negative integer in the smallest format.
func AppendUint(dst []byte, u uint64) []byte {
	switch {
	case u < 0x80:
		return append(dst, byte(u))
	case u < 0x100:
		return append(dst, 0xcc, byte(u))
	case u < 0x10000:
		return append(dst, 0xcd, byte(u>>8), byte(u))
	case u < 0x100000000:
		return appendBE(append(dst, 0xce), u, 4)
	}
	return appendBE(append(dst, 0xcf), u, 8)
}

// AppendFloat appends a float64 (Python packs every float as float64).
func AppendFloat(dst []byte, x float64) []byte {
	return appendBE(append(dst, 0xcb), math.Float64bits(x), 8)
}

// AppendString appends a string: fixstr, str8, str16 or str32.
func AppendString(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n < 0x100:
		dst = append(dst, 0xd9, byte(n))
	case n < 0x10000:
		dst = append(dst, 0xda, byte(n>>8), byte(n))
	default:
		dst = appendBE(append(dst, 0xdb), uint64(n), 4)
	}
	return append(dst, s...)
}

// AppendArrayHeader appends the header of an array of n items: fixarray, array16 or array32.
func AppendArrayHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n < 0x10000:
		return append(dst, 0xdc, byte(n>>8), byte(n))
	}
	return appendBE(append(dst, 0xdd), uint64(n), 4)
}

// AppendMapHeader appends the header of a map of n entries: fixmap, map16 or map32.
func AppendMapHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n < 0x10000:
		return append(dst, 0xde, byte(n>>8), byte(n))
	}
	return appendBE(append(dst, 0xdf), uint64(n), 4)
}

// appendBE appends the low n bytes of u, big-endian.
func appendBE(dst []byte, u uint64, n int) []byte {
	for shift := 8 * (n - 1); shift >= 0; shift -= 8 {
		dst = append(dst, byte(u>>uint(shift)))
	}
	return dst
}

// Decode decodes exactly one value filling all of b (see the rules above).
func Decode(b []byte) (Value, error) {
	return decodeNested(b, 0)
}

// decodeNested is Decode for a value that sits outer containers deep in a larger document, so
// the nesting limit counts from the document's root.
func decodeNested(b []byte, outer int) (Value, error) {
	d := decoder{buf: b}
	v, err := d.value(outer)
	if err != nil {
		return nil, err
	}
	if d.pos != len(b) {
		return nil, d.err(strconv.Itoa(len(b)-d.pos) + " trailing bytes after the value")
	}
	return v, nil
}

type decoder struct {
	buf []byte
	pos int
}

func (d *decoder) err(message string) *DecodeError {
	return &DecodeError{Offset: d.pos, Message: message}
}

func at(offset int, message string) *DecodeError {
	return &DecodeError{Offset: offset, Message: message}
}

func (d *decoder) take(n int) ([]byte, *DecodeError) {
	left := len(d.buf) - d.pos
	if left < n {
		return nil, d.err("truncated: needs " + strconv.Itoa(n) + " more bytes, " + strconv.Itoa(left) + " left")
	}
	s := d.buf[d.pos : d.pos+n]
	d.pos += n
	return s, nil
}

// be reads an n-byte big-endian unsigned integer.
func (d *decoder) be(n int) (uint64, *DecodeError) {
	s, err := d.take(n)
	if err != nil {
		return 0, err
	}
	var u uint64
	for _, c := range s {
		u = u<<8 | uint64(c)
	}
	return u, nil
}

func (d *decoder) value(depth int) (Value, error) {
	start := d.pos
	s, err := d.take(1)
	if err != nil {
		return nil, err
	}
	tag := s[0]
	switch {
	case tag <= 0x7f:
		return int64(tag), nil
	case tag <= 0x8f:
		return d.mapOf(int(tag&0x0f), depth)
	case tag <= 0x9f:
		return d.array(int(tag&0x0f), depth)
	case tag <= 0xbf:
		return d.str(int(tag & 0x1f))
	case tag >= 0xe0:
		return int64(int8(tag)), nil
	}
	switch tag {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xca, 0xcb:
		var x float64
		if tag == 0xca {
			u, err := d.be(4)
			if err != nil {
				return nil, err
			}
			x = float64(math.Float32frombits(uint32(u)))
		} else {
			u, err := d.be(8)
			if err != nil {
				return nil, err
			}
			x = math.Float64frombits(u)
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, at(start, "NaN and infinities are not JSON numbers")
		}
		return x, nil
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, err := d.be(1 << (tag - 0xcc))
		if err != nil {
			return nil, err
		}
		if u > maxInt64 {
			return u, nil
		}
		return int64(u), nil
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (tag - 0xd0)
		u, err := d.be(n)
		if err != nil {
			return nil, err
		}
		shift := uint(64 - 8*n) // sign-extend
		return int64(u<<shift) >> shift, nil
	case 0xd9, 0xda, 0xdb:
		n, err := d.be(1 << (tag - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(lengthOf(n))
	case 0xdc, 0xdd:
		n, err := d.be(2 << (tag - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.array(lengthOf(n), depth)
	case 0xde, 0xdf:
		n, err := d.be(2 << (tag - 0xde))
		if err != nil {
			return nil, err
		}
		return d.mapOf(lengthOf(n), depth)
	case 0xc4, 0xc5, 0xc6:
		return nil, at(start, "binary data (bin) is not JSON")
	case 0xc1:
		return nil, at(start, "0xc1 is never used in msgpack")
	}
	return nil, at(start, "extension types (ext) are not JSON") // 0xc7-0xc9, 0xd4-0xd8
}

// lengthOf is a 32-bit length as an int, capped where a 32-bit int ends (TinyGo's int on
// wasm): no input is that long, so the cap only changes the number in a truncation message.
func lengthOf(n uint64) int {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}

func (d *decoder) str(n int) (Value, error) {
	start := d.pos
	b, err := d.take(n)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, at(start, "string is not valid UTF-8")
	}
	return string(b), nil
}

func (d *decoder) enter(depth int) (int, error) {
	if depth >= MaxDepth {
		return 0, d.err("nested more than " + strconv.Itoa(MaxDepth) + " levels deep")
	}
	return depth + 1, nil
}

// capacity for n announced items without trusting a hostile length: each takes a byte.
func (d *decoder) capacity(n int) int {
	if left := len(d.buf) - d.pos; n > left {
		return left
	}
	return n
}

func (d *decoder) array(n int, depth int) (Value, error) {
	depth, err := d.enter(depth)
	if err != nil {
		return nil, err
	}
	items := make([]Value, 0, d.capacity(n))
	for i := 0; i < n; i++ {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
	}
	return items, nil
}

func (d *decoder) mapOf(n int, depth int) (Value, error) {
	depth, err := d.enter(depth)
	if err != nil {
		return nil, err
	}
	entries := make(Map, 0, d.capacity(n/2))
	for i := 0; i < n; i++ {
		keyAt := d.pos
		key, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		k, ok := key.(string)
		if !ok {
			return nil, at(keyAt, "map key is a "+TypeName(key)+", not a string")
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		entries = append(entries, Entry{k, v})
	}
	return dedupe(entries), nil
}

// dedupe applies Python dict semantics to repeated keys: the first position, the last value.
func dedupe(entries Map) Map {
	n := len(entries)
	if n < 2 {
		return entries
	}
	if n <= 16 { // small maps (nearly all): compare pairs, no allocation
		repeated := false
		for j := 1; j < n && !repeated; j++ {
			for i := 0; i < j; i++ {
				if entries[i].Key == entries[j].Key {
					repeated = true
					break
				}
			}
		}
		if !repeated {
			return entries
		}
	}
	first := make(map[string]int, n)
	out := make(Map, 0, n)
	for _, e := range entries {
		if i, ok := first[e.Key]; ok {
			out[i].Value = e.Value
			continue
		}
		first[e.Key] = len(out)
		out = append(out, e)
	}
	return out
}
