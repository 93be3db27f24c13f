package catalog

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

func mustParse(t *testing.T, spec string) *schema.EventTypes {
	t.Helper()
	types, err := schema.ParseEventTypes(spec)
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// versions returns "spec@first hour" of each recorded version, oldest first.
func versions(t *testing.T, db *storage.DB) []string {
	t.Helper()
	head, err := LoadEventTypes(db)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for v := head; v != nil; v = v.Previous {
		since := "always"
		if !v.Since.IsZero() {
			since = v.Since.Format("15:04")
		}
		out = append([]string{v.String() + "@" + since}, out...)
	}
	return out
}

func TestRecordEventTypes(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	at := func(hhmm string) time.Time {
		d, err := time.Parse("15:04", hhmm)
		if err != nil {
			t.Fatal(err)
		}
		return day.Add(time.Duration(d.Hour())*time.Hour + time.Duration(d.Minute())*time.Minute)
	}
	steps := []struct {
		spec, now string
		want      []string
		since     string // of the returned head; "" = always
	}{
		// The first settings apply to every hour.
		{"click:sub=4", "10:20", []string{"*,click:sub=4@always"}, ""},
		// The same settings add nothing, whenever.
		{"click:sub=4", "11:20", []string{"*,click:sub=4@always"}, ""},
		// A change mid-hour applies from the next hour.
		{"click:sub=0", "11:20", []string{"*,click:sub=4@always", "*,click@12:00"}, "12:00"},
		// Near the end of an hour, max skew (5m) pushes it one hour on:
		// events up to 13:01 may already be stored under sub=0.
		{"click:sub=2", "12:56", []string{"*,click:sub=4@always", "*,click@12:00", "*,click:sub=2@14:00"}, "14:00"},
		// A restart before the pending change began replaces it.
		{"click:sub=6", "12:57", []string{"*,click:sub=4@always", "*,click@12:00", "*,click:sub=6@14:00"}, "14:00"},
		// A clock gone back does not move a version before the newest.
		{"click:sub=6:ttl=1h", "09:00", []string{"*,click:sub=4@always", "*,click@12:00", "*,click:ttl=1h0m0s:sub=6@14:00"}, "14:00"},
		// The default counts as a setting too.
		{"*:ttl=24h,click:ttl=1h:sub=6", "14:00", []string{"*,click:sub=4@always", "*,click@12:00", "*,click:ttl=1h0m0s:sub=6@14:00", "*:ttl=24h0m0s,click:ttl=1h0m0s:sub=6@15:00"}, "15:00"},
	}
	for i, st := range steps {
		before := len(versions(t, db))
		head, recorded, err := RecordEventTypes(db, mustParse(t, st.spec), at(st.now), 5*time.Minute)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if same := i > 0 && st.spec == steps[i-1].spec; recorded == same {
			t.Errorf("step %d: recorded = %v, want %v (versions %d before)", i, recorded, !same, before)
		}
		if got := versions(t, db); !equalStrings(got, st.want) {
			t.Fatalf("step %d (%s at %s): versions %q, want %q", i, st.spec, st.now, got, st.want)
		}
		wantSince := time.Time{}
		if st.since != "" {
			wantSince = at(st.since)
		}
		if !head.Since.Equal(wantSince) || head.String() != mustParse(t, st.spec).String() {
			t.Fatalf("step %d: returned %q from %s, want %q from %s", i, head, head.Since, st.spec, wantSince)
		}
		// The returned history is the recorded one.
		n := 0
		for v := head; v != nil; v = v.Previous {
			n++
		}
		if n != len(st.want) {
			t.Fatalf("step %d: returned history has %d versions, want %d", i, n, len(st.want))
		}
	}
	// The history survives a reopen.
	want := versions(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	if got := versions(t, db); !equalStrings(got, want) {
		t.Fatalf("after reopen: versions %q, want %q", got, want)
	}
	// AllowOnlyListed is the current process's rule, kept in the result.
	cur := mustParse(t, "*:ttl=24h,click:ttl=1h:sub=6")
	cur.AllowOnlyListed = true
	head, _, err := RecordEventTypes(db, cur, at("16:00"), 5*time.Minute)
	if err != nil || !head.AllowOnlyListed || head.Allowed("view") {
		t.Fatalf("AllowOnlyListed lost: %+v %v", head, err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLoadEventTypesCorrupt(t *testing.T) {
	good, _ := schema.AppendValue(nil, bucket.TypeText, "click:sub=4")
	key := func(v int64) []byte {
		k, err := schema.EventTypesClustering.Encode(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tests := []struct {
		name       string
		key, value []byte
	}{
		{"key not an hour", key(1800), good},
		{"key not bigint", []byte{1, 2}, good},
		{"no value", key(math.MinInt64), nil},
		{"value not text", key(0), []byte{byte(bucket.TypeInt), 0x80, 0, 0, 1}},
		{"value not settings", key(0), append([]byte{byte(bucket.TypeText)}, "click:sub=x"...)},
	}
	for _, tt := range tests {
		if _, err := decodeEventTypesVersion(tt.key, tt.value); !errors.Is(err, storage.ErrCorruption) {
			t.Errorf("%s: error %v, want ErrCorruption", tt.name, err)
		}
	}
}

// FuzzDecodeEventTypesVersion: a history row never panics the decoder;
// whatever decodes encodes to a row that decodes to the same version.
func FuzzDecodeEventTypesVersion(f *testing.F) {
	for _, v := range []struct {
		first int64
		spec  string
	}{{math.MinInt64, "*"}, {1795334400, "*:ttl=168h,click:ttl=24h:sub=4"}, {0, "click"}, {3600, "x:sub=1024"}} {
		k, _ := schema.EventTypesClustering.Encode(nil, v.first)
		val, _ := schema.AppendValue(nil, bucket.TypeText, v.spec)
		f.Add(k, val)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		v, err := decodeEventTypesVersion(key, value)
		if err != nil {
			if !errors.Is(err, storage.ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		k2, v2, err := encodeEventTypesVersion(v)
		if err != nil {
			t.Fatalf("decoded %q from %s does not encode: %v", v, v.Since, err)
		}
		again, err := decodeEventTypesVersion(k2, v2)
		if err != nil || again.String() != v.String() || !again.Since.Equal(v.Since) {
			t.Fatalf("decoded %q from %s; re-encoded decodes to %v, %v", v, v.Since, again, err)
		}
	})
}
