package httpapi

import (
	"fmt"
	"github.com/eventide/eventide/reader"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// exampleTime is the RFC 3339 time error messages show as a model.
const exampleTime = "2026-11-22T10:00:00Z"

// params is a request's query string, checked against the parameters an
// endpoint accepts. Empty values count as absent, so a script can pass
// "from=" to mean the default.
type params struct {
	values url.Values
}

// parseParams parses rawQuery and refuses unknown and repeated parameters.
func parseParams(rawQuery string, allowed []string) (params, *problem) {
	return parseParamsRepeatable(rawQuery, allowed, nil)
}

// parseParamsRepeatable is parseParams where the parameters in repeatable
// may be given several times (read them with all).
func parseParamsRepeatable(rawQuery string, allowed, repeatable []string) (params, *problem) {
	values, err := url.ParseQuery(rawQuery)
	if err != nil {
		p := badParameter(fmt.Sprintf("the query string is not valid URL encoding (%v); escape %% as %%25 and + as %%2B", err))
		return params{}, &p
	}
	var unknown []string
	for name, vs := range values {
		if !slices.Contains(allowed, name) {
			unknown = append(unknown, strconv.Quote(name))
			continue
		}
		if len(vs) > 1 && !slices.Contains(repeatable, name) {
			p := badParameter(fmt.Sprintf("parameter %s is given %d times; give it once", name, len(vs)))
			return params{}, &p
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		noun := "parameter"
		if len(unknown) > 1 {
			noun = "parameters"
		}
		return params{}, &problem{
			Type:   ProblemUnknownParameter,
			Title:  "Unknown parameter",
			Status: 400,
			Detail: fmt.Sprintf("unknown %s %s; this endpoint accepts %s", noun, strings.Join(unknown, ", "), strings.Join(allowed, ", ")),
		}
	}
	return params{values: values}, nil
}

func (p params) get(name string) string { return p.values.Get(name) }

// all returns the non-empty values of a repeatable parameter.
func (p params) all(name string) []string {
	var out []string
	for _, v := range p.values[name] {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// types returns the values of a repeatable type parameter, refusing more
// than max and any type given twice.
func (p params) types(max int) ([]string, *problem) {
	types := p.all("type")
	if len(types) > max {
		pr := badParameter(fmt.Sprintf("parameter type is given %d times; give at most %d types", len(types), max))
		return nil, &pr
	}
	for i, t := range types {
		if slices.Contains(types[:i], t) {
			pr := badParameter(fmt.Sprintf("parameter type: %q is given twice; give each type once", t))
			return nil, &pr
		}
	}
	return types, nil
}

// requiredType returns the event type, which every query needs.
func (p params) requiredType() (string, *problem) {
	t := p.get("type")
	if t == "" {
		pr := badParameter("parameter type is required: the event type to query, e.g. type=click")
		return "", &pr
	}
	return t, nil
}

// window returns [from, to): to defaults to now, from to one hour before
// to.
func (p params) window(now time.Time) (from, to time.Time, pr *problem) {
	to = now
	if s := p.get("to"); s != "" {
		if to, pr = parseTime("to", s); pr != nil {
			return
		}
	}
	from = to.Add(-time.Hour)
	if s := p.get("from"); s != "" {
		if from, pr = parseTime("from", s); pr != nil {
			return
		}
	}
	if !from.Before(to) {
		bad := badParameter(fmt.Sprintf("parameter from (%s) is not before to (%s); the window is [from, to)",
			from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano)))
		return from, to, &bad
	}
	return from, to, nil
}

// parseTime parses an RFC 3339 time. time.Parse alone is not enough: it
// also takes a one-digit hour (T9:00:00Z) and a comma before the fraction
// (09:00:00,5Z), which RFC 3339 and api/openapi.yaml's date-time do not.
func parseTime(name, s string) (time.Time, *problem) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil && isRFC3339(s) {
		return t, nil
	}
	detail := fmt.Sprintf("parameter %s: %q is not an RFC 3339 time such as %s", name, s, exampleTime)
	if strings.Contains(s, " ") {
		// A "+01:00" offset arrives as " 01:00" when the + is not escaped.
		detail += "; write a + in a time offset as %2B in a URL"
	}
	pr := badParameter(detail)
	return time.Time{}, &pr
}

// isRFC3339 reports whether s has RFC 3339's date-time shape with an
// upper-case T and Z (as time.Parse wants them):
// YYYY-MM-DDTHH:MM:SS[.F+](Z|+HH:MM|-HH:MM). The values are time.Parse's
// to check.
func isRFC3339(s string) bool {
	const shape = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(shape) {
		return false
	}
	for i := range len(shape) {
		if c := s[i]; shape[i] == 'd' && (c < '0' || c > '9') || shape[i] != 'd' && c != shape[i] {
			return false
		}
	}
	rest := s[len(shape):]
	if len(rest) > 0 && rest[0] == '.' {
		digits := 1
		for digits < len(rest) && '0' <= rest[digits] && rest[digits] <= '9' {
			digits++
		}
		if digits == 1 {
			return false
		}
		rest = rest[digits:]
	}
	if rest == "Z" {
		return true
	}
	return len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && isDigits(rest[1:3]) && rest[3] == ':' && isDigits(rest[4:6])
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// intParam parses a whole number in [lo, hi]; absent gives def.
func (p params) intParam(name string, def, lo, hi int) (int, *problem) {
	s := p.get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		pr := badParameter(fmt.Sprintf("parameter %s: %q is not a whole number; use %d to %d", name, s, lo, hi))
		return 0, &pr
	}
	if n < lo || n > hi {
		pr := badParameter(fmt.Sprintf("parameter %s: %d is out of range; use %d to %d", name, n, lo, hi))
		return 0, &pr
	}
	return n, nil
}

// boolParam parses 1, 0, true or false; absent is false.
func (p params) boolParam(name string) (bool, *problem) {
	s := p.get(name)
	switch strings.ToLower(s) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	pr := badParameter(fmt.Sprintf("parameter %s: %q is not 1, 0, true or false", name, s))
	return false, &pr
}

// stepParam parses a Go duration that is a whole number of minutes;
// absent gives one minute.
func (p params) stepParam(name string) (time.Duration, *problem) {
	s := p.get(name)
	if s == "" {
		return time.Minute, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		pr := badParameter(fmt.Sprintf("parameter %s: %q is not a duration such as 1m, 15m or 1h", name, s))
		return 0, &pr
	}
	if d < time.Minute || d%time.Minute != 0 {
		pr := badParameter(fmt.Sprintf("parameter %s: %s is not a whole number of minutes; use a multiple of 1m such as 1m, 15m or 1h", name, d))
		return 0, &pr
	}
	return d, nil
}

// MaxCountPoints is the most points one /v1/counts answer may hold
// (docs/http-api.md): the reader's own limit, checked here first so the
// answer never depends on the reader's arithmetic.
const MaxCountPoints = reader.MaxCountPoints

// checkCountPoints refuses a window that holds more than MaxCountPoints
// steps in all for its series (types), before the reader plans it, and one too long for the reader's
// time.Duration arithmetic. It counts in big integers: to.Sub(from)
// saturates and adding a step to it may overflow, for the years 0 to 9999
// and the steps up to ~292 years that the parameters allow.
func checkCountPoints(from, to time.Time, step time.Duration, series int) *problem {
	// Points are aligned to multiples of step since the Unix epoch, as the
	// reader aligns them; big.Int's Div is Euclidean, so this is the floor
	// for times before 1970 too.
	bigStep := big.NewInt(int64(step))
	firstNanos := new(big.Int).Div(bigNanos(from), bigStep)
	firstNanos.Mul(firstNanos, bigStep)
	span := new(big.Int).Sub(bigNanos(to), firstNanos) // > 0: first <= from < to
	// points = ceil(span / step)
	points := new(big.Int).Add(span, bigStep)
	points.Sub(points, big.NewInt(1)).Quo(points, bigStep)
	if series > 1 {
		all := new(big.Int).Mul(points, big.NewInt(int64(series)))
		if all.Cmp(big.NewInt(MaxCountPoints)) > 0 {
			pr := badQuery(fmt.Sprintf("from %s to %s in steps of %s is %s points for each of %d types, %s in all, more than the limit of %d; use a larger step, a narrower window or fewer types",
				from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano), step, points, series, all, MaxCountPoints))
			return &pr
		}
	}
	if points.Cmp(big.NewInt(MaxCountPoints)) > 0 {
		pr := badQuery(fmt.Sprintf("from %s to %s in steps of %s is %s points, more than the limit of %d; use a larger step or a narrower window",
			from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano), step, points, MaxCountPoints))
		return &pr
	}
	if !new(big.Int).Add(span, bigStep).IsInt64() {
		pr := badQuery(fmt.Sprintf("from %s (rounded down to a multiple of step %s: %s) to %s plus one step is longer than %s; use a smaller step or a narrower window",
			from.UTC().Format(time.RFC3339Nano), step, bigNanosTime(firstNanos).Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano), maxSpanText))
		return &pr
	}
	return nil
}

// maxSpanText is the longest time.Duration, in words.
const maxSpanText = "292 years"

// bigNanosTime is the time n nanoseconds after the Unix epoch.
func bigNanosTime(n *big.Int) time.Time {
	sec, nsec := new(big.Int).DivMod(n, big.NewInt(int64(time.Second)), new(big.Int))
	return time.Unix(sec.Int64(), nsec.Int64()).UTC()
}

// bigNanos is t in nanoseconds since the Unix epoch, without overflow.
func bigNanos(t time.Time) *big.Int {
	n := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(int64(time.Second)))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}

// queryParam is r.URL.Query()[name], without parsing the query string
// when it cannot hold name (neither name nor a %-escape in it): the
// guards of every data request look for timeout and complete, which
// few requests give, before the handler parses its own parameters.
func queryParam(r *http.Request, name string) []string {
	raw := r.URL.RawQuery
	if !strings.Contains(raw, name) && !strings.Contains(raw, "%") {
		return nil
	}
	return r.URL.Query()[name]
}
