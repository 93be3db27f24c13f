package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"time"
)

// Rejection reasons the invalid events are made to trigger, each of which
// the writer checks whatever its configuration (docs/events.md,
// "Rejections"). time_in_future is left out: it depends on --max-skew.
var InvalidReasons = []string{
	"malformed_json", "type_mismatch", "invalid_id", "missing_time", "invalid_time",
	"invalid_ttl", "invalid_user", "invalid_data", "expired_on_arrival",
}

// Kinds of event.
const (
	KindValid   = "valid"
	KindInvalid = "invalid"
	KindProbe   = "probe"
)

// EventConfig shapes the event stream.
type EventConfig struct {
	Seed uint64
	// Run names this run in the event types: [a-z0-9]{1,16}.
	Run string
	// Types is the number of event types, drawn with Zipf exponent ZipfS
	// (type 0 the most frequent), unless Mix is set.
	Types int
	ZipfS float64
	// Mix, if set, names the types and their weights instead.
	Mix []Weight
	// PayloadMedian is the median size in bytes of an event's body;
	// sizes are log-normal with PayloadSigma, clamped to
	// [MinPayload, PayloadMax].
	PayloadMedian int
	PayloadSigma  float64
	PayloadMax    int
	// LateRatio of events have an event time LateMin to LateMax before
	// their intended start.
	LateRatio        float64
	LateMin, LateMax time.Duration
	// OutOfOrderRatio of events have an event time up to OutOfOrderMax
	// before their intended start.
	OutOfOrderRatio float64
	OutOfOrderMax   time.Duration
	// InvalidRatio of events are invalid, each with one of
	// InvalidReasons, drawn uniformly.
	InvalidRatio float64
	// ProbeEvery makes every ProbeEvery-th event a probe; 0 makes none.
	ProbeEvery int64
}

// MinPayload is the smallest body a valid event is given.
const MinPayload = 64

var runPattern = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// DefaultEventConfig returns the defaults the command starts from.
func DefaultEventConfig() EventConfig {
	return EventConfig{
		Types: 20, ZipfS: 1.1,
		PayloadMedian: 200, PayloadSigma: 0.5, PayloadMax: 4096,
		LateRatio: 0.01, LateMin: time.Minute, LateMax: 90 * time.Minute,
		OutOfOrderRatio: 0.05, OutOfOrderMax: 2 * time.Second,
		InvalidRatio: 0.001,
	}
}

// Validate says what is wrong with cfg.
func (c *EventConfig) Validate() error {
	var errs []error
	if !runPattern.MatchString(c.Run) {
		errs = append(errs, fmt.Errorf("run id %q: must be 1 to 16 of a-z 0-9", c.Run))
	}
	if len(c.Mix) == 0 && (c.Types < 1 || c.Types > 1000) {
		errs = append(errs, fmt.Errorf("types %d: must be 1 to 1000", c.Types))
	}
	if len(c.Mix) == 0 && !(c.ZipfS > 0) {
		errs = append(errs, fmt.Errorf("zipf exponent %v: must be positive", c.ZipfS))
	}
	for _, w := range c.Mix {
		if !typeNamePattern.MatchString(w.Name) {
			errs = append(errs, fmt.Errorf("type %q in the mix: must be 1 to 32 of a-z 0-9 _", w.Name))
		}
		if w.Name == "probe" {
			errs = append(errs, errors.New(`type "probe" in the mix: the name is the probes' own`))
		}
	}
	if c.PayloadMedian < MinPayload || c.PayloadMax < c.PayloadMedian || c.PayloadMax > 60<<10 {
		errs = append(errs, fmt.Errorf("payload median %d and max %d: need %d <= median <= max <= 61440", c.PayloadMedian, c.PayloadMax, MinPayload))
	}
	if c.PayloadSigma < 0 || c.PayloadSigma > 3 {
		errs = append(errs, fmt.Errorf("payload sigma %v: must be 0 to 3", c.PayloadSigma))
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"late ratio", c.LateRatio}, {"out-of-order ratio", c.OutOfOrderRatio}, {"invalid ratio", c.InvalidRatio}} {
		if !(r.v >= 0 && r.v <= 1) {
			errs = append(errs, fmt.Errorf("%s %v: must be 0 to 1", r.name, r.v))
		}
	}
	if c.LateRatio+c.OutOfOrderRatio+c.InvalidRatio > 1 {
		errs = append(errs, fmt.Errorf("late, out-of-order and invalid ratios add up to more than 1"))
	}
	if c.LateRatio > 0 && (c.LateMin <= 0 || c.LateMax < c.LateMin || c.LateMax > 24*time.Hour) {
		errs = append(errs, fmt.Errorf("late range %s to %s: need 0 < min <= max <= 24h", c.LateMin, c.LateMax))
	}
	if c.OutOfOrderRatio > 0 && (c.OutOfOrderMax <= 0 || c.OutOfOrderMax > time.Hour) {
		errs = append(errs, fmt.Errorf("out-of-order max %s: must be positive, at most 1h", c.OutOfOrderMax))
	}
	if c.ProbeEvery < 0 {
		errs = append(errs, fmt.Errorf("probe every %d: must not be negative", c.ProbeEvery))
	}
	return errors.Join(errs...)
}

var typeNamePattern = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// Event is one generated event, before its intended start gives it a
// time.
type Event struct {
	Seq  int64
	Kind string // KindValid, KindInvalid or KindProbe
	// Type is the event type, and Subject "events.<Type>".
	Type    string
	Subject string
	// Offset is how far before the intended start the event time is
	// (late and out-of-order events).
	Offset time.Duration
	// Late and OutOfOrder say which of the two made Offset.
	Late, OutOfOrder bool
	// Reason is the rejection reason an invalid event is made for.
	Reason string
	// Probe numbers probes 0, 1, 2, ...
	Probe int64
	// PayloadSize is the length of the body a valid event gets.
	PayloadSize int
	// Data fills the event's data: a letter the body repeats.
	fill byte
}

// EventGen makes events; it is not safe for concurrent use (the arrival
// scheduler calls it from one goroutine).
type EventGen struct {
	cfg    EventConfig
	rng    *rand.Rand
	types  []string
	pick   picker
	probes int64
}

// NewEventGen validates cfg and returns its generator.
func NewEventGen(cfg EventConfig) (*EventGen, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid event workload: %w", err)
	}
	g := &EventGen{cfg: cfg, rng: newRand(cfg.Seed, 1)}
	if len(cfg.Mix) > 0 {
		var w []float64
		for _, m := range cfg.Mix {
			g.types = append(g.types, TypeName(cfg.Run, m.Name))
			w = append(w, m.Weight)
		}
		g.pick = newPicker(w)
	} else {
		for i := range cfg.Types {
			g.types = append(g.types, TypeName(cfg.Run, fmt.Sprintf("t%02d", i)))
		}
		g.pick = newPicker(ZipfWeights(cfg.Types, cfg.ZipfS))
	}
	return g, nil
}

// TypeName is the event type of name in run: "lt-<run>-<name>".
func TypeName(run, name string) string { return "lt-" + run + "-" + name }

// ProbeType is run's probe event type.
func ProbeType(run string) string { return TypeName(run, "probe") }

// Types returns the event types the generator draws valid events from, in
// weight order.
func (g *EventGen) Types() []string { return g.types }

// Next returns event seq. Call it with seq 0, 1, 2, ... in order.
func (g *EventGen) Next(seq int64) Event {
	// Every draw happens for every event, whatever its kind, so changing
	// one ratio does not reshuffle the rest of the sequence.
	u := g.rng.Float64()
	typeIdx := g.pick.pick(g.rng)
	size := g.payloadSize()
	offsetU := g.rng.Float64()
	reason := InvalidReasons[g.rng.IntN(len(InvalidReasons))]
	fill := byte('a' + g.rng.IntN(26))

	ev := Event{Seq: seq, Kind: KindValid, Type: g.types[typeIdx], PayloadSize: size, fill: fill}
	c := &g.cfg
	switch {
	case c.ProbeEvery > 0 && seq%c.ProbeEvery == 0:
		ev.Kind = KindProbe
		ev.Type = ProbeType(c.Run)
		ev.Probe = g.probes
		ev.PayloadSize = 0
		g.probes++
	case u < c.InvalidRatio:
		ev.Kind = KindInvalid
		ev.Reason = reason
	case u < c.InvalidRatio+c.LateRatio:
		ev.Late = true
		ev.Offset = c.LateMin + time.Duration(offsetU*float64(c.LateMax-c.LateMin))
	case u < c.InvalidRatio+c.LateRatio+c.OutOfOrderRatio:
		ev.OutOfOrder = true
		ev.Offset = time.Duration(offsetU * float64(c.OutOfOrderMax))
	}
	ev.Subject = "events." + ev.Type
	return ev
}

func (g *EventGen) payloadSize() int {
	c := &g.cfg
	x := float64(c.PayloadMedian) * math.Exp(c.PayloadSigma*g.rng.NormFloat64())
	return int(min(max(x, MinPayload), float64(c.PayloadMax)))
}

// Time returns the event time of ev started at intended.
func (ev *Event) Time(intended time.Time) time.Time { return intended.Add(-ev.Offset) }

// Body returns the JSON body of ev started at intended. A valid event's
// body is PayloadSize bytes long (or a little more for a large Seq); a
// probe's data holds its number.
func (ev *Event) Body(dst []byte, intended time.Time) []byte {
	t := ev.Time(intended).UnixMilli()
	switch ev.Kind {
	case KindProbe:
		return fmt.Appendf(dst, `{"time":%d,"data":{"probe":%d}}`, t, ev.Probe)
	case KindInvalid:
		return ev.invalidBody(dst, t)
	}
	dst = fmt.Appendf(dst, `{"time":%d,"user":"u%d","data":{"seq":%d,"pad":"`, t, ev.Seq%10007, ev.Seq)
	pad := ev.PayloadSize - len(dst) - len(`"}}`)
	for range max(pad, 1) {
		dst = append(dst, ev.fill)
	}
	return append(dst, `"}}`...)
}

func (ev *Event) invalidBody(dst []byte, t int64) []byte {
	switch ev.Reason {
	case "malformed_json":
		return fmt.Appendf(dst, `{"time":%d,"data":`, t)
	case "type_mismatch":
		return fmt.Appendf(dst, `{"type":%q,"time":%d}`, ev.Type+"-other", t)
	case "invalid_id":
		return append(dst, `{"id":"9a3e2f7c-1d2b-4c5e-8f6a-0b1c2d3e4f50"}`...)
	case "missing_time":
		return append(dst, `{"data":{}}`...)
	case "invalid_time":
		return append(dst, `{"time":"yesterday"}`...)
	case "invalid_ttl":
		return fmt.Appendf(dst, `{"time":%d,"ttl":0}`, t)
	case "invalid_user":
		return fmt.Appendf(dst, `{"time":%d,"user":42}`, t)
	case "invalid_data":
		return fmt.Appendf(dst, `{"time":%d,"data":[1,2]}`, t)
	case "expired_on_arrival":
		// A day old with a minute to live.
		return fmt.Appendf(dst, `{"time":%d,"ttl":60}`, t-int64(24*time.Hour/time.Millisecond))
	}
	panic("BUG: invalid event of unknown reason " + strconv.Quote(ev.Reason))
}
