package consumer

import (
	"testing"

	"github.com/nats-io/nats.go"
)

var ackReplySeeds = []string{
	"$JS.ACK.EVENTS.eventide-writer.1.42.40.1764000000123456789.7",
	"$JS.ACK._.AbCdEf.EVENTS.eventide-writer.3.42.40.1764000000123456789.0.XyZ",
	"$JS.ACK.hub.AbCdEf.EVENTS.w.1.2.3.4.5",          // v2 without the last token
	"$JS.ACK.hub.AbCdEf.EVENTS.w.1.2.3.4.5.tok.more", // more tokens than v2
	"$JS.ACK.EVENTS.w.1.2.3.4",                       // too few
	"$JS.ACK.EVENTS.w.1.2.3.4.5.6",                   // between v1 and v2
	"$JS.NAK.EVENTS.w.1.2.3.4.5",
	"$JS.ACK.EVENTS.w.x.2.-3.4.5",
	"$JS.ACK.EVENTS.w.1.99999999999999999999999.3.4.5",
	"$JS.ACK.EVENTS.w.1.2.3.4.\u00e9",
	"$JS.ACK.........",
	"",
}

func TestParseAckReply(t *testing.T) {
	got, err := parseAckReply("$JS.ACK._.AbCdEf.EVENTS.eventide-writer.3.42.40.1764000000123456789.7.XyZ")
	want := ackMeta{numDelivered: 3, streamSeq: 42, consumerSeq: 40, timestampNanos: 1764000000123456789, numPending: 7}
	if err != nil || got != want {
		t.Fatalf("v2: %+v, %v; want %+v", got, err, want)
	}
	got, err = parseAckReply("$JS.ACK.EVENTS.eventide-writer.1.42.40.1764000000123456789.0")
	want = ackMeta{numDelivered: 1, streamSeq: 42, consumerSeq: 40, timestampNanos: 1764000000123456789}
	if err != nil || got != want {
		t.Fatalf("v1: %+v, %v; want %+v", got, err, want)
	}
	for _, s := range []string{"$JS.ACK.EVENTS.w.1.2.3.4", "$JS.NAK.EVENTS.w.1.2.3.4.5", "$JS.ACK.EVENTS.w.1.2.3.4.5.6", ""} {
		if md, err := parseAckReply(s); err == nil {
			t.Errorf("parseAckReply(%q) = %+v, want an error", s, md)
		}
	}
}

// FuzzParseAckReply holds parseAckReply to nats.go's Msg.Metadata: the
// same subjects accepted, the same numbers read.
func FuzzParseAckReply(f *testing.F) {
	for _, s := range ackReplySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		got, err := parseAckReply(reply)
		m := &nats.Msg{Reply: reply, Sub: &nats.Subscription{}}
		md, refErr := m.Metadata()
		if (err != nil) != (refErr != nil) {
			t.Fatalf("parseAckReply(%q): error %v, nats.go's: %v", reply, err, refErr)
		}
		if err != nil {
			return
		}
		want := ackMeta{
			numDelivered: md.NumDelivered, streamSeq: md.Sequence.Stream, consumerSeq: md.Sequence.Consumer,
			numPending: md.NumPending, timestampNanos: md.Timestamp.UnixNano(),
		}
		if got != want {
			t.Fatalf("parseAckReply(%q) = %+v, nats.go reads %+v", reply, got, want)
		}
	})
}

func BenchmarkDeliveryMeta(b *testing.B) {
	m := pulledMsg{&nats.Msg{Reply: ackReplySeeds[1], Sub: &nats.Subscription{}}}
	b.Run("parseAckReply", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := deliveryMeta(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nats.go", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := m.Metadata(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
