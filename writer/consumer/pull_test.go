package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAppendPullRequest: the server reads the request as it was meant.
func TestAppendPullRequest(t *testing.T) {
	for _, want := range []server.JSApiConsumerGetNextRequest{
		{Batch: 1000, MaxBytes: 16 << 20, Expires: 5 * time.Millisecond},
		{Batch: 1, Expires: 100 * time.Millisecond},
	} {
		var got server.JSApiConsumerGetNextRequest
		b := appendPullRequest(nil, want.Batch, want.MaxBytes, want.Expires)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got.Batch != want.Batch || got.MaxBytes != want.MaxBytes || got.Expires != want.Expires || got.NoWait {
			t.Errorf("%s read as %+v, want %+v", b, got, want)
		}
	}
}

func TestPullEnded(t *testing.T) {
	for _, tc := range []struct {
		status, desc string
		done, err    bool
	}{
		{"404", "No Messages", true, false},
		{"408", "Request Timeout", true, false},
		{"409", "Message Size Exceeds MaxBytes", true, false},
		{"100", "Idle Heartbeat", false, false},
		{"409", "Consumer Deleted", true, true},
		{"409", "Leadership Change", true, true},
		{"400", "Bad Request", true, true},
		{"", "", true, true},
	} {
		h := nats.Header{}
		if tc.status != "" {
			h.Set("Status", tc.status)
			h.Set("Description", tc.desc)
		}
		done, err := pullEnded(h)
		if done != tc.done || (err != nil) != tc.err {
			t.Errorf("%s %s: done %v, err %v; want done %v, an error %v", tc.status, tc.desc, done, err, tc.done, tc.err)
		}
	}
}

// TestRepositionDropsEarlierPulls: a pull request left open when its fetch
// gave up (here: its context ended) still has messages delivered for it;
// after the consumer is repositioned they must not be taken for the new
// deliveries, which restart at consumer sequence 1 too.
func TestRepositionDropsEarlierPulls(t *testing.T) {
	c, js := lingerConsumer(t, Config{FetchBatch: 10, FetchLinger: -1, FetchWait: 200 * time.Millisecond})
	ctx := context.Background()
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.pull.pull(gone, nil, 5, 0, time.Minute, false); err == nil {
		t.Fatal("a pull with an ended context returned no error")
	}
	waitPullRequests(t, js, "the abandoned pull request")
	for _, d := range []string{"a", "b"} {
		if _, err := js.Publish(ctx, "seam.x", []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	delivered(t, js, 2, func() bool { return true }) // to the abandoned request

	if err := c.repositionConsumer(ctx); err != nil {
		t.Fatal(err)
	}
	var all []Delivery
	for {
		msgs, err := c.fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		ds, _, complete := c.deliveries(msgs)
		if !complete {
			t.Fatalf("after %d deliveries, a fetch brought a delivery out of sequence (one made for the pull before the reposition?)", len(all))
		}
		all = append(all, ds...)
	}
	if len(all) != 2 || string(all[0].Msg.Data()) != "a" || string(all[1].Msg.Data()) != "b" {
		t.Fatalf("after the reposition: %d deliveries, want a and b once each", len(all))
	}
}

// TestFetchKeepsOneInbox: fetches pull through the inbox subscription made
// at the reposition; none subscribes an inbox of its own (jetstream's
// Fetch did, a SUB and an UNSUB for the server each time).
func TestFetchKeepsOneInbox(t *testing.T) {
	c, js := lingerConsumer(t, Config{FetchBatch: 10, FetchWait: time.Minute})
	ctx := context.Background()
	subs := c.nc.NumSubscriptions()
	done := make(chan error, 1)
	go func() {
		msgs, err := c.fetch(ctx)
		if err == nil && len(msgs) != 1 {
			err = fmt.Errorf("fetch brought %d messages, want 1", len(msgs))
		}
		done <- err
	}()
	waitPullRequests(t, js, "the fetch's pull request")
	// The fetch waits for a first message now.
	during := c.nc.NumSubscriptions()
	if _, err := js.Publish(ctx, "seam.x", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if during != subs {
		t.Errorf("%d subscriptions while a fetch waited, %d before it: the fetch subscribed an inbox of its own", during, subs)
	}
	if got := c.nc.NumSubscriptions(); got != subs {
		t.Errorf("%d subscriptions after the fetch, %d before", got, subs)
	}
}

// FuzzPullRequest: every request the consumer can send reads back, through
// the server's own type, as what was meant.
func FuzzPullRequest(f *testing.F) {
	f.Add(1000, 16<<20, int64(5*time.Millisecond))
	f.Add(1, 0, int64(100*time.Millisecond))
	f.Fuzz(func(t *testing.T, batch, maxBytes int, expires int64) {
		if batch < 1 || maxBytes < 0 || expires < 1 {
			return // the consumer's bounds (Config defaults and flags)
		}
		var got server.JSApiConsumerGetNextRequest
		b := appendPullRequest(nil, batch, maxBytes, time.Duration(expires))
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got.Batch != batch || got.MaxBytes != maxBytes || got.Expires != time.Duration(expires) {
			t.Fatalf("%s read as %+v", b, got)
		}
	})
}

// FuzzPullEnded: any status ends a pull except a heartbeat, and only the
// normal ends carry no error.
func FuzzPullEnded(f *testing.F) {
	for _, s := range [][2]string{{"404", "No Messages"}, {"408", "Request Timeout"}, {"409", "Message Size Exceeds MaxBytes"},
		{"100", "Idle Heartbeat"}, {"409", "Consumer Deleted"}, {"", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, status, desc string) {
		h := nats.Header{}
		h.Set("Status", status)
		h.Set("Description", desc)
		done, err := pullEnded(h)
		normal := status == "404" || status == "408" || (status == "409" && desc == "Message Size Exceeds MaxBytes")
		if done != (status != "100") || (err == nil) != (normal || status == "100") {
			t.Fatalf("%q %q: done %v, err %v", status, desc, done, err)
		}
	})
}

// waitPullRequests waits until the server holds one pull request of
// consumer seam on stream SEAM: what, which the test made.
func waitPullRequests(t *testing.T, js jetstream.JetStream, what string) {
	t.Helper()
	ctx := context.Background()
	cons, err := js.Consumer(ctx, "SEAM", "seam")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumWaiting == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d pull requests, want %s", info.NumWaiting, what)
		}
	}
}

// TestLingeringPullQueuesOnlyWhatFits: a lingering pull leaves its
// deliveries queued in the subscription only when its whole batch fits
// in nats.go's queue of a synchronous subscription, which drops what
// overflows; one that fits gets every message of a batch the server
// delivers at once.
func TestLingeringPullQueuesOnlyWhatFits(t *testing.T) {
	c, js := lingerConsumer(t, Config{})
	small, err := nats.Connect(c.nc.ConnectedUrl(), nats.SyncQueueLen(64))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	for _, tc := range []struct {
		nc    *nats.Conn
		batch int
		want  bool
	}{
		{c.nc, DefaultFetchBatch, true},
		{c.nc, nats.DefaultMaxChanLen, false},
		{small, 63, true},
		{small, 64, false},
	} {
		if got := (&puller{nc: tc.nc}).canQueue(tc.batch); got != tc.want {
			t.Errorf("SubChanLen %d, batch %d: queue %v, want %v", tc.nc.Opts.SubChanLen, tc.batch, got, tc.want)
		}
	}
	// A backlog delivered at once into the small queue.
	p := newPuller(small, "SEAM", "seam")
	if err := p.reset(); err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx := context.Background()
	const n = 40
	for i := range n {
		if _, err := js.Publish(ctx, "seam.x", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := p.pull(ctx, nil, n, 0, 50*time.Millisecond, true)
	if err != nil || len(msgs) != n {
		t.Fatalf("lingering pull of %d: %d messages, %v", n, len(msgs), err)
	}
}
