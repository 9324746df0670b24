package plugin

import "testing"

// FuzzRawAgreesWithDecode: whatever the bytes, NewRaw accepts everything Decode accepts, and a
// decoded value re-encodes to bytes that decode to the same value. `go test` runs the seeds;
// `go test -fuzz FuzzRawAgreesWithDecode` explores.
func FuzzRawAgreesWithDecode(f *testing.F) {
	for _, seed := range [][]byte{
		Encode(sample()), Encode(podRequest()), {0x91, 0xc4, 0x01, 0x00}, {0xdd, 0x7f, 0xff, 0xff, 0xff},
		{0xdf, 0, 0, 0, 1, 0xa1, 'a'}, {0xdb, 0xff, 0xff, 0xff, 0xff}, {0x83, 0xa1, 'a', 1, 0xa1, 'a', 2, 0xa1, 'b', 3},
		{0xca, 0x7f, 0x80, 0, 0}, {}, {0xc1},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Decode(b)
		raw, rawErr := NewRaw(b)
		if err == nil && rawErr != nil {
			t.Fatalf("Decode accepts, NewRaw refuses: %v", rawErr)
		}
		if rawErr == nil {
			if len(raw.Bytes()) != len(b) {
				t.Fatalf("Bytes is %d of %d", len(raw.Bytes()), len(b))
			}
			for it := raw.Entries(); it.Next(); {
				it.Key().Str()
				it.Value().Truthy()
			}
			for it := raw.Items(); it.Next(); {
				it.Value().Kind()
			}
		}
		if err != nil {
			return
		}
		again, err := Decode(Encode(v))
		if err != nil || !Equal(again, v) {
			t.Fatalf("re-encoding %s: %v", Format(v), err)
		}
	})
}
