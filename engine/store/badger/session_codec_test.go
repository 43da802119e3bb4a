package badgerstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// agree decodes val with unmarshalSession and with encoding/json and fails unless both give
// the same session, or both an error. It reports whether the fast path took the record.
func agree(t *testing.T, val []byte) bool {
	t.Helper()
	var want store.Session
	wantErr := json.Unmarshal(val, &want)
	var got store.Session
	gotErr := unmarshalSession(val, &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%q: encoding/json error %v, session codec error %v", val, wantErr, gotErr)
	}
	fast, ok := scanSession(val)
	if ok && wantErr != nil {
		t.Fatalf("%q: the fast path accepted what encoding/json refuses (%v)", val, wantErr)
	}
	if wantErr != nil {
		return false
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nsession codec %#v\nencoding/json %#v", val, got, want)
	}
	if ok && !reflect.DeepEqual(fast, want) {
		t.Fatalf("%q:\nfast path     %#v\nencoding/json %#v", val, fast, want)
	}
	return ok
}

func randomString(r *rand.Rand) string {
	clean := []string{"", "a", "session 12", "héllo", "日本語", "emoji 😀", "/src/project", "openai:gpt-4o"}
	escaped := []string{`quote"`, `back\slash`, "tab\t", "nl\n", "<b>&amp;</b>", "\x00", "bad\xffutf8", "\u2028"}
	s := ""
	for range r.IntN(3) {
		if r.IntN(20) == 0 {
			s += escaped[r.IntN(len(escaped))]
		} else {
			s += clean[r.IntN(len(clean))]
		}
	}
	return s
}

func randomTime(r *rand.Rand) time.Time {
	if r.IntN(5) == 0 {
		return time.Time{}
	}
	t := time.Unix(r.Int64N(4_000_000_000), r.Int64N(1e9))
	if r.IntN(3) == 0 {
		t = t.Truncate(time.Second)
	}
	switch r.IntN(4) {
	case 0:
		return t.UTC()
	case 1:
		return t.In(time.FixedZone("X", 3600*5+1800))
	case 2:
		return t.In(time.FixedZone("", -7*3600))
	}
	return t // Local, with a monotonic reading for time.Now-like values
}

func randomSession(r *rand.Rand) store.Session {
	s := store.Session{
		ID: fmt.Sprintf("s%d", r.IntN(1e6)), Title: randomString(r), Source: randomString(r), Model: randomString(r),
		Cwd: randomString(r), ParentID: randomString(r), ParentKind: randomString(r), ForkRowID: r.Uint64() >> r.IntN(64),
		CreatedAt: randomTime(r), UpdatedAt: randomTime(r), EndedAt: randomTime(r), EndReason: randomString(r),
		RowCount: r.Int64N(1e6), Rewinds: r.Int64N(10), Principal: randomString(r), Version: r.Uint64N(1e9),
		Usage: store.Usage{InputTokens: r.Int64(), OutputTokens: r.Int64N(1e6) - 10, CachedTokens: r.Int64N(100),
			CacheWriteTokens: r.Int64N(100), ReasoningTokens: r.Int64N(100), APICalls: r.Int64N(100), ToolCalls: r.Int64N(100)},
	}
	switch r.IntN(4) {
	case 0:
		s.Usage.CostUSD = r.Float64() * math.Pow(10, float64(r.IntN(30)-15))
	case 1:
		s.Usage.CostUSD = float64(r.IntN(100))
	}
	if r.IntN(2) == 0 {
		s.Meta = map[string]string{}
		for range r.IntN(4) {
			s.Meta[randomString(r)] = randomString(r)
		}
	}
	return s
}

// TestSessionCodecAgrees: every record the store writes, and every hand-written variant of
// one (records of earlier builds without newer fields, other key orders, white space, repeated
// keys, nulls, unknown keys, numbers encoding/json refuses), decodes as encoding/json decodes
// it; and the records of ordinary sessions take the fast path.
func TestSessionCodecAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for range 5000 {
		val, err := encodeSession(randomSession(r))
		if err != nil {
			continue // a time outside what JSON can carry
		}
		if agree(t, val) {
			fast++
		}
	}
	if fast < 500 {
		t.Fatalf("only %d of 5000 records took the fast path", fast)
	}
	ordinary := store.Session{ID: "s1", Title: "session 1", Source: "cli", Model: "openai:gpt-4o", Cwd: "/src/project",
		CreatedAt: time.Now(), UpdatedAt: time.Now(), Usage: store.Usage{InputTokens: 100, CostUSD: 0.0125},
		RowCount: 4, Meta: map[string]string{"k": "v"}, Version: 7}
	val, err := encodeSession(ordinary)
	if err != nil {
		t.Fatal(err)
	}
	if !agree(t, val) {
		t.Fatalf("an ordinary session record did not take the fast path: %s", val)
	}
	for _, text := range []string{
		// As earlier builds wrote them: no principal, no cache_write_tokens, no cost.
		`{"id":"s1","title":"t","source":"cli","model":"openai:gpt-4o","cwd":"/w","created_at":"2025-03-01T10:00:00.123456789Z","updated_at":"2025-03-01T10:00:01Z","usage":{"input_tokens":10,"output_tokens":2,"cached_tokens":0,"reasoning_tokens":0,"api_calls":1,"tool_calls":0},"row_count":2,"rewinds":0,"version":3}`,
		`{"id":"s1","created_at":"2025-03-01T10:00:00+02:00","updated_at":"2025-03-01T10:00:00-07:30"}`,
		` { "id" : "s1" , "meta" : { "a" : "b" , "c" : "" } , "version" : 0 } `,
		`{"version":2,"id":"s1","usage":{}}`,
		`{"id":"s1","meta":{}}`,
		`{"id":"s1","meta":{"a":"1"},"meta":{"b":"2"}}`,
		`{"id":"s1","usage":{"input_tokens":1},"usage":{"output_tokens":2}}`,
		`{"id":"s1","id":"s2"}`,
		`{"id":"s1","meta":{"a":"1","a":"2"}}`,
		`{"id":"s1","title":null}`,
		`{"id":"s1","meta":null}`,
		`{"ID":"s1"}`,
		`{"id":"s1","unknown":[1,2]}`,
		`{"id":"s1","title":"\u00e9\n"}`,
		`{"id":"s1","version":1e2}`,
		`{"id":"s1","version":-1}`,
		`{"id":"s1","row_count":01}`,
		`{"id":"s1","row_count":-0}`,
		`{"id":"s1","row_count":1.5}`,
		`{"id":"s1","row_count":99999999999999999999}`,
		`{"id":"s1","usage":{"cost_usd":-0.0}}`,
		`{"id":"s1","usage":{"cost_usd":1E-7}}`,
		`{"id":"s1","usage":{"cost_usd":1e999}}`,
		`{"id":"s1","created_at":"2025-13-01T00:00:00Z"}`,
		`{"id":"s1","created_at":"2025-03-01 10:00:00Z"}`,
		`{"id":"s1","created_at":12}`,
		`{"id":"s1",}`,
		`{"id":"s1"} x`,
		`{"id":"s1"`,
		`{"id":"bad` + "\xff" + `"}`,
		`{"id":"tab` + "\t" + `"}`,
		`{}`,
		`null`,
		`[]`,
		``,
	} {
		agree(t, []byte(text))
	}
}

// TestOldRecordsList: a home whose session records were written as earlier builds wrote them
// (put directly, behind the store's back) opens and lists them with every field, as it
// lists the records this build writes.
func TestOldRecordsList(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]string{
		"s/old1": `{"id":"old1","title":"first","source":"cli","model":"openai:gpt-4o","cwd":"/w","created_at":"2025-03-01T10:00:00.5Z","updated_at":"2025-03-01T10:00:02Z","usage":{"input_tokens":10,"output_tokens":2,"cached_tokens":1,"reasoning_tokens":0,"api_calls":1,"tool_calls":0},"row_count":2,"rewinds":1,"meta":{"k":"v"},"version":3}`,
		"s/old2": `{"id":"old2","title":"caf\u00e9","source":"acp","created_at":"2025-03-01T11:00:00+01:00","updated_at":"2025-03-01T11:00:00+01:00","usage":{"input_tokens":0,"output_tokens":0,"cached_tokens":0,"reasoning_tokens":0,"api_calls":0,"tool_calls":0},"row_count":0,"rewinds":0,"version":1}`,
	}
	poison(t, s, old)
	if _, err := s.CreateSession(ctx, store.Session{ID: "new1", Title: "written now", Source: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list, err := s.ListSessions(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(list); got != 3 {
		t.Fatalf("listed %d sessions, want 3: %+v", got, list)
	}
	for _, sess := range list {
		raw, isOld := old["s/"+sess.ID]
		if !isOld {
			if sess.ID != "new1" || sess.Title != "written now" {
				t.Fatalf("unexpected session %+v", sess)
			}
			continue
		}
		var want store.Session
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sess, want) {
			t.Fatalf("old record listed as\n%#v\nwant\n%#v", sess, want)
		}
		got, err := s.GetSession(ctx, sess.ID)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("GetSession(%q) = %#v, %v", sess.ID, got, err)
		}
	}
	if ids := []string{list[0].ID, list[1].ID, list[2].ID}; !slices.Equal(ids, []string{"new1", "old1", "old2"}) {
		t.Fatalf("listing order %v, want newest first", ids)
	}
}
