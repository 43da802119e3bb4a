package conformance

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// generatedID matches ids a server generates: chatcmpl-…, resp_…, run_…, msg_…, call_….
var generatedID = regexp.MustCompile(`^([a-z]+)[-_]([0-9A-Za-z]{8,})$`)

// processID is how a background process's pid appears in the terminal tool's text.
var processID = regexp.MustCompile(`\(pid [0-9]+\)`)

// placeholderRef finds placeholders inside a longer client string (a path: /v1/runs/$run1).
var placeholderRef = regexp.MustCompile(`\$[a-z_]+[0-9]*`)

// placeholders maps values that differ between runs to stable names, in order of first
// appearance, and back.
type placeholders struct {
	byValue map[string]string // actual → placeholder
	byName  map[string]string // placeholder → actual
	counts  map[string]int
	seqBase map[string]float64 // session id → first seq seen
	root    string             // the fixture's scratch directory, shown as $dir in any string
}

func newPlaceholders() *placeholders {
	return &placeholders{byValue: map[string]string{}, byName: map[string]string{}, counts: map[string]int{}, seqBase: map[string]float64{}}
}

// kindOf says which placeholder family a key's value belongs to ("" = keep as is).
func kindOf(key string, v any) string {
	switch key {
	case "session_id", "child_session_id", "subagent_id", "sessionId":
		return "session"
	case "stored_session_id", "session_key", "resumed", "parent":
		return "stored"
	case "request_id", "requestId":
		return "request"
	case "tool_id", "call_id", "toolCallId":
		return "tool"
	case "row_id", "user_row_id", "survivor_user_row_ids":
		return "row"
	case "task_id", "steer_id", "steer_ids":
		return "task"
	case "replay_epoch", "epoch":
		return "epoch"
	case "replay_generation":
		return "generation"
	case "time", "timestamp", "started_at", "created", "deadline", "last_active", "turn_started_at", "saved_at", "created_at", "updated_at", "completed_at", "finished_at", "expires_at", "updatedAt":
		return "time"
	case "run_id":
		return "run"
	case "controller_id":
		return "controller"
	case "turn_id":
		return "turn"
	case "admission_id":
		return "admission"
	case "execution_generation":
		return "generation"
	case "x-hermes-session-id":
		return "session"
	case "id", "message_id", "response_id", "previous_response_id", "item_id":
		if s, ok := v.(string); ok {
			if strings.HasPrefix(s, "srq-") {
				return "request"
			}
			// generated ids: a lower-case prefix, - or _, then at least 8 characters with a digit
			if m := generatedID.FindStringSubmatch(s); m != nil && strings.ContainsAny(m[2], "0123456789") {
				return m[1]
			}
		}
	case "cwd", "model", "provider", "currentModelId", "path":
		return key
	case "duration_s", "latest_seq", "api_calls", "duration", "duration_ns", "duration_seconds":
		return key
	}
	return ""
}

func (p *placeholders) name(kind string, v any) any {
	if v == nil {
		return nil
	}
	switch kind {
	case "time", "duration_s", "latest_seq", "duration", "duration_ns", "api_calls", "duration_seconds":
		return "$" + kind
	case "cwd", "model", "provider", "currentModelId", "path":
		return "$" + kind
	}
	key := kind + ":" + fmt.Sprint(v)
	if n, ok := p.byValue[key]; ok {
		return n
	}
	p.counts[kind]++
	n := fmt.Sprintf("$%s%d", kind, p.counts[kind])
	p.byValue[key] = n
	p.byName[n] = fmt.Sprint(v)
	return n
}

// normalize rewrites one decoded frame in place and returns it.
func (p *placeholders) normalize(v any) any {
	return p.walk("", v)
}

func (p *placeholders) walk(key string, v any) any {
	switch t := v.(type) {
	case map[string]any:
		// seq is rebased per session (events carry session_id next to seq)
		if seq, ok := t["seq"].(float64); ok {
			sid, _ := t["session_id"].(string)
			base, seen := p.seqBase[sid]
			if !seen {
				base = seq - 1
				p.seqBase[sid] = base
			}
			t["seq"] = seq - base
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // placeholders are assigned in a stable order
		for _, k := range keys {
			if k == "seq" {
				continue
			}
			t[k] = p.walk(k, t[k])
		}
		return t
	case []any:
		for i := range t {
			t[i] = p.walk(key, t[i])
		}
		return t
	default:
		if str, ok := v.(string); ok && p.root != "" && strings.Contains(str, p.root) {
			v = strings.ReplaceAll(str, p.root, "$dir")
		}
		if kind := kindOf(key, v); kind != "" {
			if s, ok := v.(string); ok && s == "" {
				return v
			}
			return p.name(kind, v)
		}
		if str, ok := v.(string); ok {
			return p.inText(str)
		}
		return v
	}
}

// inText replaces the ids captured so far where they appear inside free text (a status line
// naming the session). Short values are left alone: they could be ordinary words or numbers.
func (p *placeholders) inText(s string) string {
	s = processID.ReplaceAllString(s, "(pid $$pid)") // a background process's pid
	var hits [][2]string
	for key, name := range p.byValue {
		_, actual, _ := strings.Cut(key, ":")
		if len(actual) >= 8 && strings.Contains(s, actual) {
			hits = append(hits, [2]string{actual, name})
		}
	}
	// longest first, so an id inside another id is not replaced half-way
	sort.Slice(hits, func(i, j int) bool {
		if len(hits[i][0]) != len(hits[j][0]) {
			return len(hits[i][0]) > len(hits[j][0])
		}
		return hits[i][1] < hits[j][1]
	})
	for _, h := range hits {
		s = strings.ReplaceAll(s, h[0], h[1])
	}
	return s
}

// substitute replaces placeholders in a client frame with the values captured so far.
func (p *placeholders) substitute(frame string) (string, error) {
	var v any
	if err := json.Unmarshal([]byte(frame), &v); err != nil {
		return "", err
	}
	v = p.sub(v)
	b, err := json.Marshal(v)
	return string(b), err
}

func (p *placeholders) sub(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = p.sub(x)
		}
		return t
	case []any:
		for i := range t {
			t[i] = p.sub(t[i])
		}
		return t
	case string:
		if actual, ok := p.byName[t]; ok && strings.HasPrefix(t, "$") {
			if strings.HasPrefix(t, "$row") { // row ids are numbers on the wire
				var n json.Number = json.Number(actual)
				return n
			}
			return actual
		}
		if strings.Contains(t, "$") {
			return placeholderRef.ReplaceAllStringFunc(t, func(ref string) string {
				if actual, ok := p.byName[ref]; ok {
					return actual
				}
				return ref
			})
		}
		return t
	}
	return v
}

// canonical renders a normalised value with sorted keys on one line.
func canonical(v any) string {
	b, _ := json.Marshal(v) // encoding/json sorts map keys
	return string(b)
}
