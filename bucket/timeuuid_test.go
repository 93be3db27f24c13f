package bucket

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// refCompareTimeUUID is Cassandra's TimeUUIDType.compareCustom transcribed
// from its Java, as an independent reference: reorder the msb so the version
// and timestamp lead and compare it as a signed long, then XOR bytes 9..15 of
// the lsb with 0x80 and compare the lsb as a signed long (its first byte stays
// signed through the long's sign). Valid for version 1 UUIDs only.
func refCompareTimeUUID(a, b uuid.UUID) int {
	reorder := func(msb uint64) int64 {
		return int64(msb<<48 | msb<<16&0xFFFF00000000 | msb>>32)
	}
	msbA, msbB := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	if c := cmp.Compare(reorder(msbA), reorder(msbB)); c != 0 {
		return c
	}
	lsbA := int64(binary.BigEndian.Uint64(a[8:]) ^ 0x0080808080808080)
	lsbB := int64(binary.BigEndian.Uint64(b[8:]) ^ 0x0080808080808080)
	return cmp.Compare(lsbA, lsbB)
}

// tickPool holds timestamps on the field boundaries of the UUID layout, drawn
// often so that ties and carries between time_low, time_mid and time_hi occur.
var tickPool = []uint64{0, 1, 0xffffffff, 0x100000000, 0xffffffffffff, 1 << 48, maxTicks - 1, maxTicks,
	0x01b21dd213814000, 0x01b21dd213814000 + 9999}

func randTicks(rng *rand.Rand) uint64 {
	if rng.IntN(3) == 0 {
		return tickPool[rng.IntN(len(tickPool))]
	}
	return rng.Uint64() & maxTicks
}

// randLSB returns clock sequence and node bytes biased to the signed/unsigned
// boundary (0x7f/0x80) and the extremes, so signedness bugs show up.
func randLSB(rng *rand.Rand) uint64 {
	var b [8]byte
	for i := range b {
		switch rng.IntN(6) {
		case 0:
			b[i] = 0x7f
		case 1:
			b[i] = 0x80
		case 2:
			b[i] = 0x00
		case 3:
			b[i] = 0xff
		default:
			b[i] = byte(rng.Uint32())
		}
	}
	return binary.BigEndian.Uint64(b[:])
}

func randTimeUUID(rng *rand.Rand) uuid.UUID {
	return makeTimeUUID(randTicks(rng), randLSB(rng))
}

func randAnyUUID(rng *rand.Rand) uuid.UUID {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[:8], rng.Uint64())
	binary.BigEndian.PutUint64(u[8:], randLSB(rng))
	switch rng.IntN(3) {
	case 0:
		u[6] = u[6]&0x0f | 0x10
	case 1:
		u[6] = u[6]&0x0f | 0x40
	}
	return u
}

func TestNewTimeUUIDKnownAnswer(t *testing.T) {
	// RFC 9562 appendix A.1: 2022-02-22 14:22:22 EST, clock sequence 0x33c8,
	// node 9f6bdeced846.
	at := time.Date(2022, 2, 22, 19, 22, 22, 0, time.UTC)
	u, err := NewTimeUUID(at, [8]byte{0xb3, 0xc8, 0x9f, 0x6b, 0xde, 0xce, 0xd8, 0x46})
	if err != nil {
		t.Fatal(err)
	}
	if want := "c232ab00-9414-11ec-b3c8-9f6bdeced846"; u.String() != want {
		t.Errorf("NewTimeUUID = %s, want %s", u, want)
	}
	got, err := TimeOf(u)
	if err != nil || !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("TimeOf(%s) = %s, %v; want %s UTC", u, got, err, at)
	}
	// The variant bits are forced whatever the caller passes.
	u, _ = NewTimeUUID(at, [8]byte{0x7f, 0xff, 0, 0, 0, 0, 0, 0})
	if u[8] != 0xbf || u.Variant() != uuid.RFC4122 || u.Version() != 1 {
		t.Errorf("NewTimeUUID with byte 8 = 0x7f gave %s (variant %v, version %d), want byte 8 0xbf", u, u.Variant(), u.Version())
	}
}

// TestTimeUUIDAgreesWithGoogleUUID cross-checks timestamps against the
// independent implementation in github.com/google/uuid.
func TestTimeUUIDAgreesWithGoogleUUID(t *testing.T) {
	rng := newRand(t)
	lo, hi := time.Date(1582, 10, 15, 0, 0, 0, 0, time.UTC).UnixNano(), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := 0; i < 2000; i++ {
		at := time.Unix(0, lo+rng.Int64N(hi-lo))
		u, err := NewRandomTimeUUID(at, cryptoFree{rng})
		if err != nil {
			t.Fatal(err)
		}
		sec, nsec := u.Time().UnixTime()
		want := at.Truncate(100 * time.Nanosecond)
		if !time.Unix(sec, nsec).Equal(want) || u.Version() != 1 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("NewTimeUUID(%s) = %s: google/uuid reads %s, version %d, variant %v", at, u, time.Unix(sec, nsec).UTC(), u.Version(), u.Variant())
		}
		if got, err := TimeOf(u); err != nil || !got.Equal(want) {
			t.Fatalf("TimeOf(%s) = %s, %v; want %s", u, got, err, want)
		}
		if u[10]&1 != 1 {
			t.Fatalf("NewRandomTimeUUID(%s) = %s: multicast bit of the random node is not set", at, u)
		}
	}
	// And the other way round: an id google/uuid builds from the real clock.
	g, err := uuid.NewUUID()
	if err != nil {
		t.Fatal(err)
	}
	sec, nsec := g.Time().UnixTime()
	if got, err := TimeOf(g); err != nil || !got.Equal(time.Unix(sec, nsec)) {
		t.Errorf("TimeOf(google %s) = %s, %v; want %s", g, got, err, time.Unix(sec, nsec))
	}
}

// cryptoFree adapts a math/rand source to io.Reader for reproducible ids.
type cryptoFree struct{ rng *rand.Rand }

func (c cryptoFree) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c.rng.Uint32())
	}
	return len(p), nil
}

func TestNewRandomTimeUUIDReadError(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := NewRandomTimeUUID(at, strings.NewReader("short"))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("NewRandomTimeUUID with a 5-byte reader: error %v, want io.ErrUnexpectedEOF", err)
	}
	u, err := NewRandomTimeUUID(at, bytes.NewReader([]byte{0, 0, 0, 0, 0, 0, 0, 0}))
	if err != nil || u.String() != "d0c3c000-e6a4-11f0-8000-010000000000" {
		t.Errorf("NewRandomTimeUUID(zero bytes) = %s, %v; want variant and multicast bits set", u, err)
	}
}

func TestTimeUUIDRange(t *testing.T) {
	epoch := time.Date(1582, 10, 15, 0, 0, 0, 0, time.UTC)
	last := time.Unix(uuidEpochUnixSeconds+maxTicks/ticksPerSecond, maxTicks%ticksPerSecond*nanosPerTick).UTC()
	tests := []struct {
		name    string
		t       time.Time
		wantErr bool
	}{
		{"zero time.Time", time.Time{}, true},
		{"one tick before the epoch", epoch.Add(-100 * time.Nanosecond), true},
		{"one nanosecond before the epoch", epoch.Add(-1), true},
		{"the epoch", epoch, false},
		{"the last tick", last, false},
		{"the last tick plus 99ns", last.Add(99), false},
		{"one tick past the range", last.Add(100), true},
		{"far future", time.Date(292277026596, 1, 1, 0, 0, 0, 0, time.UTC), true},
	}
	for _, tt := range tests {
		u, err := NewTimeUUID(tt.t, [8]byte{})
		if tt.wantErr {
			if !errors.Is(err, ErrTimeOutOfRange) {
				t.Errorf("%s: NewTimeUUID error = %v, want ErrTimeOutOfRange", tt.name, err)
			}
			if _, err := MinTimeUUID(tt.t); !errors.Is(err, ErrTimeOutOfRange) {
				t.Errorf("%s: MinTimeUUID error = %v, want ErrTimeOutOfRange", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: NewTimeUUID: %v", tt.name, err)
			continue
		}
		if got, _ := TimeOf(u); !got.Equal(tt.t.Truncate(100)) {
			t.Errorf("%s: TimeOf(NewTimeUUID(%s)) = %s", tt.name, tt.t, got)
		}
	}
	if ticks := timestampOf(mustUUID(NewTimeUUID(last, [8]byte{}))); ticks != maxTicks {
		t.Errorf("the last tick encodes as %#x, want %#x", ticks, uint64(maxTicks))
	}
	// The last millisecond has a minimum but its maximum tick is out of range.
	if _, err := MaxTimeUUID(last); !errors.Is(err, ErrTimeOutOfRange) {
		t.Errorf("MaxTimeUUID(last tick) error = %v, want ErrTimeOutOfRange", err)
	}
	if _, err := MinTimeUUID(last); err != nil {
		t.Errorf("MinTimeUUID(last tick): %v", err)
	}
}

func mustUUID(u uuid.UUID, err error) uuid.UUID {
	if err != nil {
		panic(err)
	}
	return u
}

func TestTimeOfRejectsOtherVersions(t *testing.T) {
	for _, s := range []string{"f47ac10b-58cc-4372-a567-0e02b2c3d479", "00000000-0000-0000-0000-000000000000", "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"} {
		if _, err := TimeOf(uuid.MustParse(s)); !errors.Is(err, ErrNotTimeUUID) {
			t.Errorf("TimeOf(%s) error = %v, want ErrNotTimeUUID", s, err)
		}
	}
}

func TestCompareTimeUUIDCases(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{"equal", "13814000-1dd2-11b2-8080-808080808080", "13814000-1dd2-11b2-8080-808080808080", 0},
		{"byte 8 is signed: 0x80 (-128) < 0x7f (+127)", "13814000-1dd2-11b2-8000-000000000000", "13814000-1dd2-11b2-7f00-000000000000", -1},
		{"node byte is signed: 0xff (-1) < 0x00", "13814000-1dd2-11b2-8080-8080808080ff", "13814000-1dd2-11b2-8080-808080808000", -1},
		{"timestamp beats clock sequence", "13814000-1dd2-11b2-7f7f-7f7f7f7f7f7f", "13814001-1dd2-11b2-8080-808080808080", -1},
		{"time_mid outranks time_low", "ffffffff-0000-1000-8000-000000000000", "00000000-0001-1000-8000-000000000000", -1},
		{"time_hi outranks time_mid", "ffffffff-ffff-1000-8000-000000000000", "00000000-0000-1001-8000-000000000000", -1},
		{"timestamp is unsigned: top bit set is largest", "00000000-0000-1fff-8000-000000000000", "00000000-0000-1000-8000-000000000000", 1},
	}
	for _, tt := range tests {
		a, b := uuid.MustParse(tt.a), uuid.MustParse(tt.b)
		if got := CompareTimeUUID(a, b); got != tt.want {
			t.Errorf("%s: CompareTimeUUID(%s, %s) = %d, want %d", tt.name, a, b, got, tt.want)
		}
		if got := CompareTimeUUID(b, a); got != -tt.want {
			t.Errorf("%s: CompareTimeUUID(%s, %s) = %d, want %d", tt.name, b, a, got, -tt.want)
		}
		if got := refCompareTimeUUID(a, b); got != tt.want {
			t.Errorf("%s: reference comparator gives %d, want %d: the table is wrong", tt.name, got, tt.want)
		}
		if got := bytes.Compare(EncodeTimeUUID(nil, a), EncodeTimeUUID(nil, b)); got != tt.want {
			t.Errorf("%s: encodings compare %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestCompareTimeUUIDMatchesCassandra compares against the transcribed
// Cassandra comparator on random version 1 UUIDs, many with equal timestamps
// and with clock/node bytes on both sides of 0x80.
func TestCompareTimeUUIDMatchesCassandra(t *testing.T) {
	rng := newRand(t)
	for i := 0; i < 50000; i++ {
		a, b := randTimeUUID(rng), randTimeUUID(rng)
		if rng.IntN(2) == 0 {
			copy(b[:8], a[:8]) // same timestamp: the tie-break decides
		}
		want := refCompareTimeUUID(a, b)
		if got := CompareTimeUUID(a, b); got != want {
			t.Fatalf("CompareTimeUUID(%s, %s) = %d, Cassandra says %d", a, b, got, want)
		}
		if got := bytes.Compare(EncodeTimeUUID(nil, a), EncodeTimeUUID(nil, b)); got != want {
			t.Fatalf("encodings of %s and %s compare %d, Cassandra says %d", a, b, got, want)
		}
	}
}

// TestEncodeTimeUUIDAnyUUID checks the encoding on all versions: it must round
// trip exactly and its byte order must be CompareTimeUUID's.
func TestEncodeTimeUUIDAnyUUID(t *testing.T) {
	rng := newRand(t)
	for i := 0; i < 50000; i++ {
		a, b := randAnyUUID(rng), randAnyUUID(rng)
		if rng.IntN(2) == 0 {
			copy(b[:8], a[:8])
		}
		ea := EncodeTimeUUID([]byte("prefix"), a)[len("prefix"):]
		eb := EncodeTimeUUID(nil, b)
		if len(ea) != 16 {
			t.Fatalf("EncodeTimeUUID(%s) has %d bytes", a, len(ea))
		}
		if got, want := bytes.Compare(ea, eb), CompareTimeUUID(a, b); got != want {
			t.Fatalf("encodings of %s and %s compare %d, CompareTimeUUID %d", a, b, got, want)
		}
		back, tail, err := DecodeTimeUUID(append(ea, 0xaa))
		if err != nil || back != a || !bytes.Equal(tail, []byte{0xaa}) {
			t.Fatalf("DecodeTimeUUID(EncodeTimeUUID(%s)) = %s, tail %x, %v", a, back, tail, err)
		}
	}
}

func TestDecodeTimeUUIDShort(t *testing.T) {
	for n := 0; n < 16; n++ {
		_, _, err := DecodeTimeUUID(make([]byte, n))
		if !errors.Is(err, ErrCorruptKey) {
			t.Errorf("DecodeTimeUUID(%d bytes) error = %v, want ErrCorruptKey", n, err)
		}
	}
}

func TestEncodeTimeUUIDKnownAnswer(t *testing.T) {
	// Cassandra's byte-comparable TimeUUIDType form: version and timestamp,
	// then clock sequence and node with every byte's top bit flipped.
	u := uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846")
	want := "11ec9414c232ab00" + "3348" + "1feb5e4e58c6"
	if got := hexOf(EncodeTimeUUID(nil, u)); got != want {
		t.Errorf("EncodeTimeUUID(%s) = %s, want %s", u, got, want)
	}
}

func TestMinMaxTimeUUID(t *testing.T) {
	// Cassandra: minTimeuuid(0) and maxTimeuuid(0), the Unix epoch.
	epoch := time.Unix(0, 0)
	if u, err := MinTimeUUID(epoch); err != nil || u.String() != "13814000-1dd2-11b2-8080-808080808080" {
		t.Errorf("MinTimeUUID(epoch) = %s, %v", u, err)
	}
	if u, err := MaxTimeUUID(epoch); err != nil || u.String() != "1381670f-1dd2-11b2-7f7f-7f7f7f7f7f7f" {
		t.Errorf("MaxTimeUUID(epoch) = %s, %v", u, err)
	}
	// Sub-millisecond parts select the millisecond that holds t, also before 1970.
	for _, s := range []string{"2026-11-21T13:05:00.123999999Z", "1969-12-31T23:59:59.999500Z", "1600-01-01T00:00:00.000000001Z"} {
		at := mustTime(t, s)
		ms := at.Truncate(time.Millisecond)
		min, _ := MinTimeUUID(at)
		max, _ := MaxTimeUUID(at)
		if got, _ := TimeOf(min); !got.Equal(ms) {
			t.Errorf("TimeOf(MinTimeUUID(%s)) = %s, want %s", s, got, ms)
		}
		if got, _ := TimeOf(max); !got.Equal(ms.Add(time.Millisecond - 100)) {
			t.Errorf("TimeOf(MaxTimeUUID(%s)) = %s, want %s", s, got, ms.Add(time.Millisecond-100))
		}
		if min.Variant() != uuid.RFC4122 || max.Variant() == uuid.RFC4122 {
			t.Errorf("variants: min %v, max %v; want RFC4122 and a reserved variant (Cassandra's caveat)", min.Variant(), max.Variant())
		}
	}
}

// TestMinMaxTimeUUIDBound checks the bound property against random ids.
func TestMinMaxTimeUUIDBound(t *testing.T) {
	rng := newRand(t)
	for i := 0; i < 20000; i++ {
		ms := int64(rng.Uint64()>>4) & (1<<50 - 1) // ms since the UUID epoch
		at := time.Unix(uuidEpochUnixSeconds, 0).Add(time.Duration(ms%1_000_000_000) * time.Millisecond).Add(time.Duration(rng.IntN(1e6)))
		min, err1 := MinTimeUUID(at)
		max, err2 := MaxTimeUUID(at)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		first, _ := ticksOf(at.Truncate(time.Millisecond))
		inside := makeTimeUUID(first+uint64(rng.IntN(ticksPerMilli)), randLSB(rng))
		if rng.IntN(2) == 0 {
			inside = makeTimeUUID(first+uint64(rng.IntN(2))*(ticksPerMilli-1), randLSB(rng)) // edge ticks
		}
		if CompareTimeUUID(min, inside) > 0 || CompareTimeUUID(inside, max) > 0 {
			t.Fatalf("%s is not within [%s, %s] (millisecond of %s)", inside, min, max, at)
		}
		if first > 0 {
			before := makeTimeUUID(first-1, randLSB(rng))
			if CompareTimeUUID(before, min) >= 0 {
				t.Fatalf("%s of the previous millisecond is not below MinTimeUUID %s", before, min)
			}
		}
		after := makeTimeUUID(first+ticksPerMilli, randLSB(rng))
		if CompareTimeUUID(after, max) <= 0 {
			t.Fatalf("%s of the next millisecond is not above MaxTimeUUID %s", after, max)
		}
	}
}

// FuzzDecodeTimeUUID checks that any input decodes or fails cleanly, that
// decoding is exact, and that byte order and CompareTimeUUID agree.
func FuzzDecodeTimeUUID(f *testing.F) {
	f.Add([]byte{})
	f.Add(EncodeTimeUUID(nil, uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846")))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, tail, err := DecodeTimeUUID(data)
		if len(data) < 16 {
			if !errors.Is(err, ErrCorruptKey) {
				t.Fatalf("DecodeTimeUUID(%x) error = %v, want ErrCorruptKey", data, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("DecodeTimeUUID(%x): %v", data, err)
		}
		if enc := EncodeTimeUUID(nil, u); !bytes.Equal(enc, data[:16]) || !bytes.Equal(tail, data[16:]) {
			t.Fatalf("DecodeTimeUUID(%x) = %s, tail %x; re-encodes as %x", data, u, tail, enc)
		}
		if len(tail) >= 16 {
			v, _, _ := DecodeTimeUUID(tail)
			if got, want := CompareTimeUUID(u, v), bytes.Compare(data[:16], tail[:16]); got != want {
				t.Fatalf("CompareTimeUUID(%s, %s) = %d, byte order %d", u, v, got, want)
			}
		}
	})
}
