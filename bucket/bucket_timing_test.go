package bucket

import (
	"math/big"
	"testing"
	"time"

	"github.com/google/uuid"
)

func BenchmarkEncodeTimeUUID(b *testing.B) {
	u := uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846")
	buf := make([]byte, 0, 16)
	b.SetBytes(16)
	b.ReportAllocs()
	for b.Loop() {
		buf = EncodeTimeUUID(buf[:0], u)
	}
}

func BenchmarkDecodeTimeUUID(b *testing.B) {
	enc := EncodeTimeUUID(nil, uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846"))
	b.SetBytes(16)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeTimeUUID(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompareTimeUUID(b *testing.B) {
	x := uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846")
	y := uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced847") // tie on time: the slow path
	b.ReportAllocs()
	for b.Loop() {
		if CompareTimeUUID(x, y) != -1 {
			b.Fatal("wrong order")
		}
	}
}

func BenchmarkNewTimeUUID(b *testing.B) {
	at := time.Date(2026, 11, 21, 13, 5, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewTimeUUID(at, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClusteringEncode measures the events table key (one timeuuid DESC)
// and a wider mixed key. Boxing the values into ...any is part of the cost a
// caller pays, so it stays inside the loop.
func BenchmarkClusteringEncode(b *testing.B) {
	id := uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846")
	b.Run("events", func(b *testing.B) {
		l := ClusteringLayout{{Name: "event_id", Type: TypeTimeUUID, Order: Desc}}
		buf := make([]byte, 0, 64)
		b.SetBytes(16)
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = l.Encode(buf[:0], id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mixed", func(b *testing.B) {
		l := ClusteringLayout{
			{Name: "user", Type: TypeText},
			{Name: "day", Type: TypeTimestamp, Order: Desc},
			{Name: "amount", Type: TypeBigint},
			{Name: "event_id", Type: TypeTimeUUID, Order: Desc},
		}
		day := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
		buf := make([]byte, 0, 64)
		enc, _ := l.Encode(nil, "user-1234", day, int64(42), id)
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = l.Encode(buf[:0], "user-1234", day, int64(42), id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decimal", func(b *testing.B) {
		l := ClusteringLayout{{Name: "price", Type: TypeDecimal}}
		d := Decimal{Unscaled: big.NewInt(1234567), Scale: 2}
		buf := make([]byte, 0, 64)
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = l.Encode(buf[:0], d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkClusteringDecode(b *testing.B) {
	l := ClusteringLayout{{Name: "event_id", Type: TypeTimeUUID, Order: Desc}}
	enc, _ := l.Encode(nil, uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846"))
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}
