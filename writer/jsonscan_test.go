package writer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonScanCases are bodies whose verdict or fields are easy to get wrong;
// they seed FuzzScanEventFields too.
var jsonScanCases = []string{
	`{}`,
	` {"type":"click"} `,
	"\t{\n\"type\" : \"click\" ,\"time\":1767268740000}\r\n",
	`{"type":"a","type":"b"}`,                    // last one wins
	`{"t\u0079pe":"click"}`,                      // escaped key
	`{"type\u0000":"x","data":{"type":"inner"}}`, // nested keys are not fields
	`{"data":{"a":[1,2,{"b":null}],"c":"\"}"}}`,
	`{"ttl":-0.5e+10,"user":"\u00e9\ud83d\ude00","author":"\/"}`,
	`{"user":"caf` + "\xc3\xa9" + `"}`, // valid UTF-8
	`{"user":"bad` + "\xff" + `"}`,     // invalid UTF-8 is accepted, and decoded as U+FFFD
	`{"id":null,"time":true,"data":false}`,
	`{"a":[]}`, `{"a":[ ]}`, `{"a":{ }}`,
	`{"data":{"s":"\ud800"}}`, `{"data":{"s":"\ud83d\ude00x"}}`, // a lone surrogate; a pair
	`{"data":{"n":1e400,"m":-2E-3}}`, `{"data":{"n":1` + strings.Repeat("0", 310) + `}}`, // exponents; a long number
	`{"data":{"n":1` + strings.Repeat("0", 299) + `}}`, // 300 bytes: never out of range
	// Invalid.
	``, `{`, `}`, `[]`, `"x"`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,"a":1}`, `{"a":1 "b":2}`,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`,
	`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}", `{"a":"unterminated}`,
	`{"a":1} x`, `{"a":1}{}`, `{'a':1}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":NaN}`,
	`{"a":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + `}`,
	`{"a":` + strings.Repeat("[", maxJSONDepth-1) + strings.Repeat("]", maxJSONDepth-1) + `}`,
}

func TestScanEventFieldsMatchesEncodingJSON(t *testing.T) {
	for _, body := range jsonScanCases {
		checkScanAgainstEncodingJSON(t, []byte(body))
	}
}

func FuzzScanEventFields(f *testing.F) {
	for _, body := range jsonScanCases {
		if len(body) < 1000 {
			f.Add([]byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkScanAgainstEncodingJSON(t, body)
	})
}

// checkScanAgainstEncodingJSON: the scanner accepts exactly what
// json.Unmarshal into a map accepts, with the same raw value per field.
func checkScanAgainstEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	got, ok := scanEventFields(body)
	var want map[string]json.RawMessage
	err := json.Unmarshal(body, &want)
	if ok != (err == nil && want != nil) {
		t.Fatalf("body %q: scanner ok = %v, encoding/json err = %v (map %v)", clip(body), ok, err, want != nil)
	}
	if !ok {
		return
	}
	// parse skips the checks whose flag is false: each must then pass.
	if !got.nonASCII && !utf8.Valid(body) {
		t.Fatalf("body %q: invalid UTF-8, but the scanner saw no byte above 0x7f", clip(body))
	}
	if at := loneSurrogateEscape(body); !got.uEscape && at >= 0 {
		t.Fatalf("body %q: a lone surrogate escape at %d, but the scanner saw no \\u escape", clip(body), at)
	}
	if num, out := numberOutOfRange(body); !got.bigNumber && out {
		t.Fatalf("body %q: number %s is out of range, but the scanner saw no big number", clip(body), num)
	}
	for name, raw := range map[string][]byte{
		"type": got.typ, "id": got.id, "time": got.time, "ttl": got.ttl,
		"user": got.user, "author": got.author, "data": got.data,
	} {
		if !bytes.Equal(raw, want[name]) || (raw == nil) != (want[name] == nil) {
			t.Fatalf("body %q: field %s = %q, encoding/json gives %q", clip(body), name, raw, want[name])
		}
		if raw == nil || string(raw) == "null" { // parse treats null as absent
			continue
		}
		var wantString string
		wantErr := json.Unmarshal(raw, &wantString)
		gotString, isString := jsonString(raw)
		if isString != (wantErr == nil) || gotString != wantString {
			t.Fatalf("body %q: field %s as a string = %q, %v; encoding/json gives %q, %v",
				clip(body), name, gotString, isString, wantString, wantErr)
		}
	}
}

// TestScanStringWordBoundaries: str steps over plain bytes eight at a
// time (skipPlain), so a byte it must look at is tried at every place in
// strings of up to 40 bytes, at every alignment, against encoding/json.
func TestScanStringWordBoundaries(t *testing.T) {
	specials := []string{`\"`, `\\`, `\n`, `\u00e9`, `\u12g4`, "\x01", "\x1f", "\x7f", "\x80", "\xff", "\xc3\xa9", `"`, `\`}
	for n := 0; n <= 40; n++ {
		for _, sp := range specials {
			for at := 0; at <= n; at++ {
				s := strings.Repeat("a", at) + sp + strings.Repeat("b", n-at)
				for lead := 0; lead < 8; lead++ { // the string's alignment in the body
					checkScanAgainstEncodingJSON(t, []byte(`{"user":"`+s+`","pad":"`+strings.Repeat("x", lead)+`"}`))
					checkScanAgainstEncodingJSON(t, []byte(`{`+strings.Repeat(" ", lead)+`"data":"`+s+`"}`))
				}
			}
		}
		checkScanAgainstEncodingJSON(t, []byte(`{"data":"`+strings.Repeat("z", n))) // unterminated
	}
}
