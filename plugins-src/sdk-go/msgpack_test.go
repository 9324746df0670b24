package plugin

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// (value, bytes from Python: msgpack.packb(v, use_bin_type=True).hex())
func TestIntegersMatchPython(t *testing.T) {
	cases := []struct {
		i    int64
		want string
	}{
		{0, "00"}, {1, "01"}, {127, "7f"}, {128, "cc80"}, {255, "ccff"}, {256, "cd0100"},
		{65535, "cdffff"}, {65536, "ce00010000"}, {4294967295, "ceffffffff"},
		{4294967296, "cf0000000100000000"}, {math.MaxInt64, "cf7fffffffffffffff"},
		{-1, "ff"}, {-32, "e0"}, {-33, "d0df"}, {-128, "d080"}, {-129, "d1ff7f"},
		{-32768, "d18000"}, {-32769, "d2ffff7fff"}, {-2147483648, "d280000000"},
		{-2147483649, "d3ffffffff7fffffff"}, {math.MinInt64, "d38000000000000000"},
	}
	for _, c := range cases {
		got := hex.EncodeToString(Encode(c.i))
		if got != c.want {
			t.Errorf("%d: got %s, want %s", c.i, got, c.want)
		}
		v, err := Decode(unhex(t, c.want))
		if err != nil || v != any(c.i) {
			t.Errorf("decode %s: %#v %v", c.want, v, err)
		}
		if got := hex.EncodeToString(Encode(int(c.i))); got != c.want {
			t.Errorf("int %d: got %s", c.i, got)
		}
	}
	if got := hex.EncodeToString(Encode(uint64(math.MaxUint64))); got != "cfffffffffffffffff" {
		t.Errorf("MaxUint64: %s", got)
	}
	if v, _ := Decode(unhex(t, "cfffffffffffffffff")); v != any(uint64(math.MaxUint64)) {
		t.Errorf("MaxUint64 decodes to %#v", v)
	}
	// A value Python packs smaller, decoded from a wider format, re-encodes the small way.
	for _, wide := range []string{"d3000000000000000a", "cd000a", "ca41200000"} {
		v, err := Decode(unhex(t, wide))
		if err != nil {
			t.Fatal(err)
		}
		if wide == "ca41200000" {
			if v != any(10.0) {
				t.Errorf("float32 10: %#v", v)
			}
			continue
		}
		if got := hex.EncodeToString(Encode(v)); got != "0a" {
			t.Errorf("%s re-encodes as %s", wide, got)
		}
	}
}

func TestOtherValuesMatchPython(t *testing.T) {
	fifteen, sixteen := make([]Value, 15), make([]Value, 16)
	for i := range sixteen {
		sixteen[i] = i
		if i < 15 {
			fifteen[i] = i
		}
	}
	var keys Map
	for i := 0; i < 16; i++ {
		keys = append(keys, Entry{"k" + strconv.Itoa(i), i})
	}
	cases := []struct {
		v    Value
		want string // a prefix of the bytes when long
		size int
	}{
		{1.5, "cb3ff8000000000000", 9},
		{math.Copysign(0, -1), "cb8000000000000000", 9},
		{1e300, "cb7e37e43c8800759c", 9},
		{float32(1.5), "cb3ff8000000000000", 9},
		{"", "a0", 1},
		{strings.Repeat("a", 31), "bf6161", 32},
		{strings.Repeat("b", 32), "d9206262", 34},
		{strings.Repeat("c", 255), "d9ff6363", 257},
		{strings.Repeat("d", 256), "da01006464", 259},
		{"é", "a2c3a9", 3},
		{nil, "c0", 1},
		{true, "c3", 1},
		{false, "c2", 1},
		{[]Value{}, "90", 1},
		{fifteen, "9f000102030405060708090a0b0c0d0e", 16},
		{sixteen, "dc0010000102030405060708090a0b0c0d0e0f", 19},
		{Map{}, "80", 1},
		{Map{{"a", 1}, {"b", []Value{nil, Map{{"c", 2.25}}}}}, "82a16101a16292c081a163cb4002000000000000", 20},
		{keys, "de0010a26b3000a26b3101", 73},
		{[]string{"x"}, "91a178", 3},
		{[]Map{{}}, "9180", 2},
	}
	for _, c := range cases {
		b := Encode(c.v)
		if got := hex.EncodeToString(b); !strings.HasPrefix(got, c.want) || len(b) != c.size {
			t.Errorf("%s: got %s (%d bytes), want %s... (%d bytes)", Format(c.v), got, len(b), c.want, c.size)
		}
		back, err := Decode(b)
		if err != nil || !Equal(back, c.v) {
			t.Errorf("%s: round trip gives %s, %v", Format(c.v), Format(back), err)
		}
	}
	long := make([]Value, 65536)
	for i := range long {
		long[i] = 0
	}
	if b := Encode(long); hex.EncodeToString(b[:5]) != "dd00010000" || len(b) != 65541 {
		t.Errorf("array32 header %x", b[:5])
	}
}

func TestDecodeRefusesWhatIsNotJSON(t *testing.T) {
	cases := []struct {
		hex, want string
	}{
		{"c40100", "byte 0: binary data (bin) is not JSON"},
		{"91d40000", "byte 1: extension types (ext) are not JSON"},
		{"c1", "byte 0: 0xc1 is never used in msgpack"},
		{"cb7ff8000000000000", "NaN and infinities"},
		{"ca7f800000", "NaN and infinities"},
		{"a2c328", "byte 1: string is not valid UTF-8"},
		{"a3eda080", "string is not valid UTF-8"}, // a surrogate half
		{"810100", "byte 1: map key is a int, not a string"},
		{"92c0", "byte 2: truncated: needs 1 more bytes, 0 left"},
		{"daffff61", "truncated: needs 65535 more bytes, 1 left"},
		{"c0c0", "byte 1: 1 trailing bytes after the value"},
		{"", "truncated"},
	}
	for _, c := range cases {
		_, err := Decode(unhex(t, c.hex))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.hex, err, c.want)
		}
	}
}

func TestDecodeNestingLimit(t *testing.T) {
	deep := func(n int) []byte {
		return append([]byte(strings.Repeat("\x91", n-1)), 0x90)
	}
	if _, err := Decode(deep(MaxDepth)); err != nil {
		t.Errorf("%d levels: %v", MaxDepth, err)
	}
	if _, err := Decode(deep(MaxDepth + 1)); err == nil || !strings.Contains(err.Error(), "nested more than 128 levels deep") {
		t.Errorf("%d levels: %v", MaxDepth+1, err)
	}
}

func TestRepeatedKeysKeepFirstPositionAndLastValue(t *testing.T) {
	// {"a": 1, "b": 2, "a": 3} as Python's dict would hold it: {"a": 3, "b": 2}
	v, err := Decode(unhex(t, "83a16101a16202a16103"))
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(v, Map{{"a", 3}, {"b", 2}}) {
		t.Errorf("got %s", Format(v))
	}
	big := []byte{0xde, 0, 20}
	for i := 0; i < 20; i++ {
		big = append(big, 0xa1, byte('a'+i%10), byte(i))
	}
	v, err = Decode(big)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(Map)
	if len(m) != 10 || m[0].Key != "a" || !Equal(m[0].Value, 10) || !Equal(m[9].Value, 19) {
		t.Errorf("got %s", Format(v))
	}
}

func TestEncodePanicsOnOtherTypes(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "cannot encode") {
			t.Errorf("recovered %v", r)
		}
	}()
	Encode(map[string]string{"a": "b"})
}

func TestValueHelpers(t *testing.T) {
	var m Map
	m.Set("a", 1)
	m.Set("b", 2)
	m.Set("a", 3)
	if !Equal(m, Map{{"a", 3}, {"b", 2}}) {
		t.Errorf("Set: %s", Format(m))
	}
	if v, ok := m.Get("b"); !ok || !Equal(v, int64(2)) {
		t.Errorf("Get: %v %v", v, ok)
	}
	for _, v := range []Value{nil, false, 0, int64(0), 0.0, "", []Value{}, Map{}} {
		if Truthy(v) {
			t.Errorf("%s is truthy", Format(v))
		}
	}
	for _, v := range []Value{true, 1, uint64(math.MaxUint64), 0.5, "x", []Value{nil}, Map{{"a", nil}}} {
		if !Truthy(v) {
			t.Errorf("%s is falsy", Format(v))
		}
	}
	if Equal(1, 1.0) || Equal(Map{{"a", 1}, {"b", 2}}, Map{{"b", 2}, {"a", 1}}) || !Equal(uint8(7), int64(7)) {
		t.Error("Equal")
	}
	names := map[string]Value{"nil": nil, "bool": true, "int": uint16(1), "float": 1.0, "str": "", "array": []string{}, "map": Map{}}
	for want, v := range names {
		if got := TypeName(v); got != want {
			t.Errorf("TypeName: %s, want %s", got, want)
		}
	}
	if got := Format(Map{{"a", []Value{1, "x", nil, true, 1.5}}}); got != `{"a": [1, "x", null, true, 1.5]}` {
		t.Errorf("Format: %s", got)
	}
}
