package engine

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// transcriptProvider answers every call with "answer to <the last user message>" and keeps
// the messages of the last request it got, as "role:content" (the system prompt left out).
type transcriptProvider struct {
	mu    sync.Mutex
	last  []string
	calls int
}

func (p *transcriptProvider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		var seen []string
		user := ""
		for i, m := range req.Messages {
			if i == 0 && m.Role == "system" {
				continue
			}
			seen = append(seen, m.Role+":"+m.Content)
			if m.Role == "user" {
				user = m.Content
			}
		}
		p.mu.Lock()
		p.last = seen
		p.calls++
		p.mu.Unlock()
		yield(model.Chunk{Text: "answer to " + user}, nil)
	}
}

func (p *transcriptProvider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func (p *transcriptProvider) request() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// rowReads records the transcript reads made through it: each Rows call's query and how many
// rows it returned.
type rowReads struct {
	store.Store
	mu    sync.Mutex
	reads []rowRead
}

type rowRead struct {
	q store.RowQuery
	n int
}

func (r *rowReads) Rows(ctx context.Context, id string, q store.RowQuery) ([]store.Row, error) {
	rows, err := r.Store.Rows(ctx, id, q)
	r.mu.Lock()
	r.reads = append(r.reads, rowRead{q, len(rows)})
	r.mu.Unlock()
	return rows, err
}

func (r *rowReads) take() []rowRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reads
	r.reads = nil
	return out
}

// waitLeaseFree waits until no engine holds the session's lease (an engine gives it back once
// the session is idle), so that the next engine to act on the session runs the work itself.
func waitLeaseFree(t *testing.T, st store.Store, id string) {
	t.Helper()
	ctx := waitCtx(t)
	sub, err := st.Watch(ctx, store.Interest{Sessions: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for {
		if _, err := st.GetLease(ctx, id); errors.Is(err, store.ErrNotFound) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		select {
		case <-sub.C():
			sub.Take()
		case <-ctx.Done():
			t.Fatal("the session's lease was never given back")
		}
	}
}

// runText runs one turn of prompt on s and fails the test unless it completes.
func runText(t *testing.T, s *Session, prompt string, tr *Truncate) {
	t.Helper()
	ctx := waitCtx(t)
	adm, err := s.Submit(ctx, Prompt{Text: prompt, Truncate: tr})
	if err != nil || adm.Status != AdmitStarted {
		t.Fatalf("submit %q: %+v %v", prompt, adm, err)
	}
	out, err := s.Wait(ctx, adm.TurnID)
	if err != nil || out.Status != StatusCompleted {
		t.Fatalf("turn %q: %+v %v", prompt, out, err)
	}
}

// exchange is the transcript rows of prompts answered by transcriptProvider.
func exchange(prompts ...string) []string {
	var out []string
	for _, p := range prompts {
		out = append(out, "user:"+p, "assistant:answer to "+p)
	}
	return out
}

func wantRequest(t *testing.T, p *transcriptProvider, want []string) {
	t.Helper()
	if got := p.request(); !slices.Equal(got, want) {
		t.Fatalf("the model got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// cacheStores are the stores the transcript cache is tested on.
func cacheStores(t *testing.T) map[string]func() store.Store {
	return map[string]func() store.Store{
		"memstore": func() store.Store { return memstore.New() },
		"badger": func() store.Store {
			st, err := badgerstore.Open(filepath.Join(t.TempDir(), "state"), badgerstore.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// TestTurnSeesTranscriptWrittenElsewhere: a warm session's turn sends the model the
// transcript as stored, after another engine on the same store (another process, the lease
// passing between them) appended to it, rewound it, edited a prompt, and after a rewind
// straight through the store that archived all of it.
func TestTurnSeesTranscriptWrittenElsewhere(t *testing.T) {
	t.Parallel()
	for name, open := range cacheStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open()
			pa, pb := &transcriptProvider{}, &transcriptProvider{}
			ea := leaseEngine(t, st, nil, func(c *Config) { c.Providers = map[string]model.Provider{"p": pa} })
			eb := leaseEngine(t, st, nil, func(c *Config) { c.Providers = map[string]model.Provider{"p": pb} })
			ctx := waitCtx(t)
			sa, err := ea.Create(ctx, CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			runText(t, sa, "one", nil)
			runText(t, sa, "two", nil) // sa knows the transcript now
			wantRequest(t, pa, append(exchange("one"), "user:two"))
			sb, err := eb.Open(ctx, sa.ID())
			if err != nil {
				t.Fatal(err)
			}
			// onB runs f in the other engine once sa's engine has given the lease back, and
			// checks that it did so itself (its model was called, not sa's through its inbox).
			onB := func(prompt string, tr *Truncate) {
				t.Helper()
				waitLeaseFree(t, st, sa.ID())
				before := pb.Calls()
				runText(t, sb, prompt, tr)
				if pb.Calls() != before+1 {
					t.Fatalf("the turn %q did not run in the other engine", prompt)
				}
				waitLeaseFree(t, st, sa.ID())
			}
			undoB := func() {
				t.Helper()
				waitLeaseFree(t, st, sa.ID())
				if _, err := sb.Undo(ctx); err != nil {
					t.Fatal(err)
				}
			}

			onB("three", nil)
			runText(t, sa, "four", nil)
			wantRequest(t, pa, append(exchange("one", "two", "three"), "user:four"))

			// The other engine undoes "four" and "three" and asks again: the rows sa knew last
			// are archived, and the survivors live on under new ids.
			undoB()
			undoB()
			onB("five", nil)
			runText(t, sa, "six", nil)
			wantRequest(t, pa, append(exchange("one", "two", "five"), "user:six"))

			// An edit of the second prompt through the other engine: a rewind in the middle.
			hist, err := sb.History(ctx, RowQuery{})
			if err != nil {
				t.Fatal(err)
			}
			second := slices.IndexFunc(hist, func(r Row) bool { return r.Role == "user" && r.Content == "two" })
			if second < 0 {
				t.Fatalf("no prompt %q in %+v", "two", hist)
			}
			onB("two, edited", &Truncate{BeforeRowID: hist[second].ID, Confirm: true})
			runText(t, sa, "seven", nil)
			wantRequest(t, pa, append(exchange("one", "two, edited"), "user:seven"))

			// sa's own undo, then a prompt through the other engine: sa's next turn finds as
			// many rows after the last one it read as it would after a plain append.
			waitLeaseFree(t, st, sa.ID())
			if _, err := sa.Undo(ctx); err != nil {
				t.Fatal(err)
			}
			onB("eight", nil)
			runText(t, sa, "nine", nil)
			wantRequest(t, pa, append(exchange("one", "two, edited", "eight"), "user:nine"))

			// Everything archived straight through the store, one row put in its place.
			if _, err := st.Rewind(ctx, sa.ID(), store.Fence{}, 0, []store.Row{{Role: "user", Content: "fresh start"}}); err != nil {
				t.Fatal(err)
			}
			runText(t, sa, "ten", nil)
			wantRequest(t, pa, []string{"user:fresh start", "user:ten"})
			if got, want := contents(t, st, sa.ID()), []string{"user:fresh start", "user:ten", "assistant:answer to ten"}; !slices.Equal(got, want) {
				t.Fatalf("stored transcript %q, want %q", got, want)
			}
		})
	}
}

// TestWarmTurnReadsOnlyNewRows: a warm turn reads from the store only the rows stored since
// the session's last read (from the last row it knew, which shows the rows before it are
// unchanged), not the whole transcript; the model still gets all of it.
func TestWarmTurnReadsOnlyNewRows(t *testing.T) {
	t.Parallel()
	for name, open := range cacheStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rr := &rowReads{Store: open()}
			p := &transcriptProvider{}
			e := leaseEngine(t, rr, nil, func(c *Config) { c.Providers = map[string]model.Provider{"p": p} })
			s, err := e.Create(waitCtx(t), CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var prompts []string
			for i := range 6 {
				prompts = append(prompts, strings.Repeat("p", i+1))
				runText(t, s, prompts[i], nil)
			}
			rr.take()
			runText(t, s, "warm", nil)
			wantRequest(t, p, append(exchange(prompts...), "user:warm"))
			reads := rr.take()
			if len(reads) == 0 {
				t.Fatal("the warm turn read no rows: the model's transcript came from nowhere")
			}
			total := 0
			for _, r := range reads {
				if r.q.AfterID == 0 {
					t.Fatalf("the warm turn read the whole transcript: %+v (all reads %+v)", r, reads)
				}
				total += r.n
			}
			if total > 3 {
				t.Fatalf("the warm turn read %d rows (%+v), want at most 3: the last row it knew (the previous prompt), the previous answer and the new prompt", total, reads)
			}
		})
	}
}

// TestActiveRowsConcurrentReads: reads of a session's transcript racing each other and the
// appends of another writer each get the transcript as it was at some point: every row
// appended before the read started, in order, and nothing else. (With -race it also checks
// that a read extending the cached rows never writes what another read was handed.)
func TestActiveRowsConcurrentReads(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	e := leaseEngine(t, st, nil, func(c *Config) { c.Providers = map[string]model.Provider{"p": &transcriptProvider{}} })
	ctx := waitCtx(t)
	s, err := e.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runText(t, s, "0", nil)
	base := len(contents(t, st, s.ID()))
	const appends, readers = 200, 4
	var appended atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range appends {
			if _, err := st.AppendRows(ctx, s.ID(), store.Fence{}, []store.Row{{Role: "user", Content: strconv.Itoa(i)}}); err != nil {
				t.Error(err)
				return
			}
			appended.Store(int64(i + 1))
		}
	}()
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				before := int(appended.Load())
				rows, err := s.activeRows(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				got := rows[base:]
				if len(got) < before || len(got) > appends {
					t.Errorf("a read after %d appends got %d of them", before, len(got))
					return
				}
				for i, r := range got {
					if r.Content != strconv.Itoa(i) || (i > 0 && r.ID <= got[i-1].ID) {
						t.Errorf("row %d of the appended ones is %+v", i, r)
						return
					}
				}
				if before == appends {
					return
				}
			}
		}()
	}
	wg.Wait()
}
