package fanout

// Data-driven scripts in testdata/*.txt. Each case is a command line, its
// input lines, a line "----", and the expected output, up to a blank line.
// Run with -rewrite to regenerate the expected outputs. Commands:
//
//	options threshold=N chunk=N shards=N cap=N trim=N backfill=N workers=N parts=N
//	    (first, before any other command) the fan-out options
//	apply
//	    one event per input line, applied one message per batch:
//	    follow USER AUTHOR | unfollow USER AUTHOR | post AUTHOR LABEL TEXT...
//	    | delete AUTHOR LABEL | raw TYPE USER AUTHOR DATA ("-" is empty;
//	    USER and AUTHOR may hold Go escapes such as \xff)
//	    The output lists the skips so far.
//	work [chunks=N]
//	    works every pending chunk (or N), oldest job first
//	timeline USER [limit=N]
//	    the whole timeline read in pages of N (default 20): one line per
//	    post "LABEL AUTHOR TEXT", then the page count
//	followers AUTHOR | following USER [limit=N]
//	jobs
//	    the pending job rows: "job SEQ part N KIND AUTHOR POST
//	    cursor=NAME chunks=N followers=N", SEQ being the sequence of the
//	    message that created the job
//	reopen
//	    closes and reopens the store

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata/*.txt")

type ddCase struct {
	comments []string // the "#" lines before the command
	cmd      string
	input    []string
	want     []string
}

func parseDataDriven(t *testing.T, path string) []ddCase {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []ddCase
	var comments []string
	lines := strings.Split(string(raw), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "#") {
			comments = append(comments, l)
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		c := ddCase{cmd: l, comments: comments}
		comments = nil
		i++
		for ; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s: command %q has no ----", path, c.cmd)
		}
		for i++; i < len(lines) && lines[i] != ""; i++ {
			c.want = append(c.want, lines[i])
		}
		cases = append(cases, c)
	}
	return cases
}

func TestDataDriven(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no testdata/*.txt")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cases := parseDataDriven(t, path)
			var e *env
			var out strings.Builder
			for _, c := range cases {
				fields := strings.Fields(c.cmd)
				args := map[string]int{}
				for _, f := range fields[1:] {
					if k, v, ok := strings.Cut(f, "="); ok {
						n, err := strconv.Atoi(v)
						if err != nil {
							t.Fatalf("%s: bad argument %q", c.cmd, f)
						}
						args[k] = n
					}
				}
				if e == nil {
					opts := DefaultOptions()
					if fields[0] == "options" {
						set := func(k string, dst *int) {
							if v, ok := args[k]; ok {
								*dst = v
							}
						}
						th := int(opts.LargeThreshold)
						set("threshold", &th)
						opts.LargeThreshold = int64(th)
						set("chunk", &opts.ChunkSize)
						set("shards", &opts.Shards)
						set("cap", &opts.TimelineCap)
						set("trim", &opts.TrimEvery)
						set("backfill", &opts.Backfill)
						set("workers", &opts.Workers)
						set("parts", &opts.PartsPerShard)
					}
					e = newEnv(t, opts)
				}
				got := runCommand(t, e, fields, args, c.input)
				if !*rewrite && strings.Join(got, "\n") != strings.Join(c.want, "\n") {
					t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", path, c.cmd, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
				}
				for _, l := range c.comments {
					fmt.Fprintf(&out, "%s\n", l)
				}
				fmt.Fprintf(&out, "%s\n", c.cmd)
				for _, l := range c.input {
					fmt.Fprintf(&out, "%s\n", l)
				}
				fmt.Fprintf(&out, "----\n")
				for _, l := range got {
					fmt.Fprintf(&out, "%s\n", l)
				}
				fmt.Fprintf(&out, "\n")
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func runCommand(t *testing.T, e *env, fields []string, args map[string]int, input []string) []string {
	dash := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	switch fields[0] {
	case "options":
		return []string{"ok"}
	case "reopen":
		e.reopen()
		return []string{"ok"}
	case "jobs":
		it, err := e.db.Slice(context.Background(), storage.SliceQuery{Table: catalog.FanoutJobsTable, Partition: catalog.JobsPartition()})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out []string
		for it.Next() {
			j, err := decodeJob(it.Row())
			if err != nil {
				t.Fatal(err)
			}
			cursor := "-"
			if j.hasCursor {
				cursor = j.cursor
			}
			out = append(out, fmt.Sprintf("job %d part %d/%d %s %s %s cursor=%s chunks=%d followers=%d",
				j.Job>>subBits, j.Shard, j.shards, j.kind, j.author, e.label(j.postID), cursor, j.chunks, j.followers))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			out = []string{"no jobs"}
		}
		return out
	case "apply":
		for _, l := range input {
			f := strings.Fields(l)
			switch {
			case len(f) == 3 && f[0] == "follow":
				e.apply(e.follow(dash(f[1]), dash(f[2])))
			case len(f) == 3 && f[0] == "unfollow":
				e.apply(e.unfollow(dash(f[1]), dash(f[2])))
			case len(f) >= 3 && f[0] == "post":
				e.apply(e.post(dash(f[1]), f[2], strings.Join(f[3:], " ")))
			case len(f) == 3 && f[0] == "delete":
				e.apply(e.del(dash(f[1]), f[2]))
			case len(f) == 5 && f[0] == "raw":
				var data []byte
				if f[4] != "-" {
					data = []byte(f[4])
				}
				e.apply(e.msg(f[1], unescape(t, dash(f[2])), unescape(t, dash(f[3])), data))
			default:
				t.Fatalf("apply: bad line %q", l)
			}
		}
		s := e.skips()
		if s == "" {
			s = "no skips"
		}
		return []string{"skips: " + s}
	case "work":
		n := 0
		for {
			if max, ok := args["chunks"]; ok && n == max {
				break
			}
			refs, err := e.f.PendingChunks(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(refs) == 0 {
				break
			}
			if _, err := e.f.WorkChunk(context.Background(), refs[0]); err != nil {
				t.Fatal(err)
			}
			n++
		}
		return []string{fmt.Sprintf("chunks %d", n)}
	case "timeline":
		limit := 20
		if v, ok := args["limit"]; ok {
			limit = v
		}
		posts, pages := e.timeline(fields[1], limit)
		var out []string
		for _, p := range posts {
			var d struct{ Text string }
			_ = json.Unmarshal(p.Data, &d)
			out = append(out, fmt.Sprintf("%s %s %s", e.label(p.ID), p.Author, d.Text))
		}
		return append(out, fmt.Sprintf("(%d posts, %d pages)", len(posts), pages))
	case "followers", "following":
		limit := 100
		if v, ok := args["limit"]; ok {
			limit = v
		}
		var names []string
		token := ""
		pages := 0
		for {
			var p, err = e.tl.Followers(context.Background(), fields[1], limit, token)
			if fields[0] == "following" {
				p, err = e.tl.Following(context.Background(), fields[1], limit, token)
			}
			if err != nil {
				t.Fatal(err)
			}
			pages++
			names = append(names, p.Names...)
			if p.NextPage == "" {
				break
			}
			token = p.NextPage
		}
		return []string{fmt.Sprintf("%s (%d pages)", strings.Join(names, " "), pages)}
	}
	t.Fatalf("unknown command %q", fields[0])
	return nil
}

func unescape(t *testing.T, s string) string {
	u, err := strconv.Unquote(`"` + s + `"`)
	if err != nil {
		t.Fatalf("bad escape in %q: %v", s, err)
	}
	return u
}
