package httpapi

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/eventide/eventide/bucket/schema"
)

// The /v1/events answer is the API's hottest path (a dashboard's "latest
// 50" polls it), and encoding/json spent most of its time there
// reflecting over eventJSON and validating each event's data twice
// (json.Valid, then json.RawMessage's compaction). appendEventsResponse
// writes the same bytes json.Marshal(eventsResponse) does, without
// reflection and with one validation pass over the data;
// TestAppendEventsResponseMatchesMarshal and FuzzAppendEvent hold it to
// json.Marshal.

// appendEventsResponse appends the JSON of resp, as json.Marshal encodes
// an eventsResponse whose Events are a.eventJSON of events.
func (a *api) appendEventsResponse(dst []byte, events []schema.Event, nextPage, trace string, fresh *freshnessJSON) []byte {
	dst = append(dst, `{"events":[`...)
	dst = a.encoded.appendEvents(dst, a, events)
	dst = append(dst, ']')
	if nextPage != "" {
		dst = append(dst, `,"next_page":`...)
		dst = appendJSONString(dst, nextPage)
	}
	if trace != "" {
		dst = append(dst, `,"trace":`...)
		dst = appendJSONString(dst, trace)
	}
	if fresh != nil {
		dst = append(dst, `,"freshness":`...)
		dst = appendFreshnessJSON(dst, fresh)
	}
	return append(dst, '}')
}

// appendEvent appends the JSON of a.eventJSON(e).
func (a *api) appendEvent(dst []byte, e *schema.Event) []byte {
	dst = append(dst, `{"id":"`...)
	dst = appendUUID(dst, e.ID)
	dst = append(dst, `","type":`...)
	dst = appendJSONString(dst, e.Type)
	dst = append(dst, `,"time":"`...)
	dst = e.Time().UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	if e.User != "" {
		dst = append(dst, `,"user":`...)
		dst = appendJSONString(dst, e.User)
	}
	if e.Author != "" {
		dst = append(dst, `,"author":`...)
		dst = appendJSONString(dst, e.Author)
	}
	dst = append(dst, `,"data":`...)
	dst = a.appendEventData(dst, e)
	return append(dst, '}')
}

// appendEventData appends an event's data as json.Marshal encodes the
// json.RawMessage a.eventJSON makes of it: compacted, with <, >, &, U+2028
// and U+2029 escaped; data that is not JSON becomes a string.
func (a *api) appendEventData(dst []byte, e *schema.Event) []byte {
	valid, spaced := scanJSON(e.Data)
	if !valid {
		// The writer stores only JSON objects; never let one bad row
		// fail every page that holds it.
		a.logger.Warn("stored event data is not JSON; returning it as a string", "id", e.ID, "type", e.Type)
		return appendJSONString(dst, string(e.Data))
	}
	// Valid JSON with nothing to compact or escape is its own encoding:
	// what the writer stores from a compact producer, the usual case.
	// Spaces inside strings stay (only whitespace between tokens is
	// compacted; tabs and newlines cannot be in a valid string); U+2028
	// and U+2029 are the only escaped runes that start with 0xe2. The
	// byte searches are vectorized, unlike one IndexAny over the set.
	if !spaced && bytes.IndexByte(e.Data, '<') < 0 && bytes.IndexByte(e.Data, '>') < 0 &&
		bytes.IndexByte(e.Data, '&') < 0 && bytes.IndexByte(e.Data, 0xe2) < 0 {
		return append(dst, e.Data...)
	}
	b, err := json.Marshal(json.RawMessage(e.Data))
	if err != nil {
		panic("BUG: cannot encode valid JSON event data: " + err.Error())
	}
	return append(dst, b...)
}

// appendUUID appends id in its canonical 36-character form, as
// uuid.UUID.String.
func appendUUID(dst []byte, id [16]byte) []byte {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return append(dst, b[:]...)
}

// appendJSONString appends s as json.Marshal encodes a string.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, err := json.Marshal(s)
			if err != nil {
				panic("BUG: cannot encode a string: " + err.Error())
			}
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendFreshnessJSON appends f as json.Marshal encodes it.
func appendFreshnessJSON(dst []byte, f *freshnessJSON) []byte {
	if f.Shards == nil {
		return append(dst, `{"shards":null}`...)
	}
	dst = append(dst, `{"shards":[`...)
	for i := range f.Shards {
		s := &f.Shards[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"shard":`...)
		dst = strconv.AppendInt(dst, int64(s.Shard), 10)
		dst = append(dst, `,"applied_seq":`...)
		dst = strconv.AppendUint(dst, s.AppliedSeq, 10)
		if s.AppliedTime != "" {
			dst = append(dst, `,"applied_time":`...)
			dst = appendJSONString(dst, s.AppliedTime)
		}
		if s.Pending != nil {
			dst = append(dst, `,"pending":`...)
			dst = strconv.AppendUint(dst, *s.Pending, 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// bodyBuffers recycles the buffers of hand-encoded answers.
type bodyBuffers struct{ pool sync.Pool }

// maxPooledBody is the largest buffer kept: a rare huge page must not stay
// in memory for good.
const maxPooledBody = 1 << 20

func (b *bodyBuffers) get() []byte {
	if p, _ := b.pool.Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	return make([]byte, 0, 16<<10)
}

func (b *bodyBuffers) put(buf []byte) {
	if cap(buf) <= maxPooledBody {
		b.pool.Put(&buf)
	}
}
