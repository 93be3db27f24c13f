package cli

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzValues feeds one input to every flag value: none panics, a value
// that accepts it holds something its own check allows, and its String
// sets the same value again.
func FuzzValues(f *testing.F) {
	for _, seed := range []string{"", " ", "0", "5", "-1", "1e3", "99999999999999999999", "90s", "1h30m", "-5m", "soon",
		"127.0.0.1:8080", "[::1]:0", ":65536", "host:port", "a,b", " a , b ", "a,,b", ",", "text", "json"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n int
		if iv := (Int{N: &n, Lo: -3, Hi: 1000}); iv.Set(s) == nil {
			if n < -3 || n > 1000 {
				t.Fatalf("Int accepted %q as %d, outside -3..1000", s, n)
			}
			roundTrip(t, iv, Int{N: new(int), Lo: -3, Hi: 1000})
		}
		var d time.Duration
		if dv := (Duration{D: &d, Min: time.Millisecond}); dv.Set(s) == nil {
			if d < time.Millisecond {
				t.Fatalf("Duration accepted %q as %s, below 1ms", s, d)
			}
			roundTrip(t, dv, Duration{D: new(time.Duration), Min: time.Millisecond})
		}
		var addr string
		if av := (Addr{Addr: &addr, Optional: true}); av.Set(s) == nil && addr != "" {
			_, port, err := net.SplitHostPort(addr)
			if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 0 || p > 65535 {
				t.Fatalf("Addr accepted %q", s)
			}
			roundTrip(t, av, Addr{Addr: new(string)})
		}
		var list []string
		if lv := (&List{List: &list, EmptyOK: true}); lv.Set(s) == nil {
			for _, item := range list {
				if item == "" || item != strings.TrimSpace(item) || strings.Contains(item, ",") {
					t.Fatalf("List accepted %q with item %q", s, item)
				}
			}
			roundTrip(t, lv, &List{List: new([]string), EmptyOK: true})
		}
		if cv := (&Choice{Choices: []string{"text", "json"}}); cv.Set(s) == nil && s != "text" && s != "json" {
			t.Fatalf("Choice accepted %q", s)
		}
	})
}

// roundTrip sets fresh to got's String and wants the same String back.
func roundTrip(t *testing.T, got, fresh interface {
	String() string
	Set(string) error
}) {
	t.Helper()
	if err := fresh.Set(got.String()); err != nil || fresh.String() != got.String() {
		t.Fatalf("%T: String %q does not set again: %v (got %q)", got, got.String(), err, fresh.String())
	}
}
