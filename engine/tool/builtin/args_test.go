package builtin

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeArgs(t *testing.T) {
	type args struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Flag   bool   `json:"flag"`
		Mode   string `json:"mode"`
	}
	lo, hi := intRange(1, 10)
	s := object([]string{"path"}, map[string]*schema{
		"path":   {Type: "string"},
		"offset": {Type: "integer", Minimum: lo, Maximum: hi},
		"flag":   {Type: "boolean"},
		"mode":   {Type: "string", Enum: []string{"a", "b"}},
	})
	tests := []struct {
		name, raw string
		want      []string // substrings of the error; none means success
	}{
		{"ok", `{"path":"x","offset":3,"flag":true,"mode":"b"}`, nil},
		{"empty means no fields", ``, []string{`missing required field "path"`}},
		{"null fields are absent", `{"path":"x","offset":null}`, nil},
		{"wrong type string", `{"path": 5}`, []string{`invalid arguments for t: field "path" must be a string`}},
		{"wrong type integer", `{"path":"x","offset":"3"}`, []string{`field "offset" must be an integer, got a string`}},
		{"fractional integer", `{"path":"x","offset":1.5}`, []string{`field "offset" must be an integer`}},
		{"boolean", `{"path":"x","flag":"yes"}`, []string{`field "flag" must be a boolean`}},
		{"enum", `{"path":"x","mode":"c"}`, []string{`field "mode" must be one of "a", "b"`}},
		{"range low", `{"path":"x","offset":0}`, []string{`must be at least 1`}},
		{"range high", `{"path":"x","offset":11}`, []string{`must be at most 10`}},
		{"missing", `{"offset":2}`, []string{`missing required field "path"`}},
		{"null required", `{"path":null}`, []string{`missing required field "path"`}},
		{"unknown", `{"path":"x","pth":1}`, []string{`unknown field "pth"`, "accepted fields: flag, mode, offset, path"}},
		{"several problems at once", `{"path":1,"offset":"x"}`, []string{`field "offset"`, `field "path"`}},
		{"malformed", `{"path":`, []string{"malformed JSON"}},
		{"trailing data", `{"path":"x"} {}`, []string{"malformed JSON"}},
		{"not an object", `["x"]`, []string{"must be a JSON object, got an array"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a args
			err := decodeArgs("t", s, json.RawMessage(tc.raw), &a)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if a.Path != "x" {
					t.Fatalf("decoded %+v", a)
				}
				return
			}
			if err == nil {
				t.Fatalf("expected an error, decoded %+v", a)
			}
			if !errors.Is(err, ErrInvalidArgs) {
				t.Fatalf("error does not wrap ErrInvalidArgs: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestSpecsAreValidSchemas(t *testing.T) {
	names := map[string]bool{}
	for _, tl := range Defaults(nil) {
		spec := tl.Spec()
		if names[spec.Name] {
			t.Fatalf("duplicate tool name %q", spec.Name)
		}
		names[spec.Name] = true
		if spec.Description == "" {
			t.Fatalf("%s has no description", spec.Name)
		}
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(spec.Parameters, &s); err != nil {
			t.Fatalf("%s: parameters are not JSON: %v", spec.Name, err)
		}
		if s.Type != "object" || len(s.Required) == 0 {
			t.Fatalf("%s: schema %s", spec.Name, spec.Parameters)
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				t.Fatalf("%s: required %q is not a property", spec.Name, r)
			}
		}
	}
	for _, n := range []string{"terminal", "process", "read_file", "write_file", "patch", "search_files", "todo"} {
		if !names[n] {
			t.Fatalf("Defaults lacks %s", n)
		}
	}
}

func TestWrongTypeArgsEveryTool(t *testing.T) {
	env := newEnv(t)
	for _, tl := range Defaults(nil) {
		name := tl.Spec().Name
		res := call(t, tl, env, `{"path": 5, "command": 5, "pattern": 5, "action": 5, "mode": 5, "todos": 5}`)
		mustFail(t, res, "invalid arguments for "+name+": ", "must be")
		res = call(t, tl, env, `{not json`)
		mustFail(t, res, "invalid arguments for "+name+": malformed JSON")
	}
}

func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"pattern":"x","limit":5}`, `{"pattern":1}`, `{`, `null`, `{"pattern":"x","offset":-1}`, `[1]`, `{"pattern":"x"}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var a searchArgs
		err := decodeArgs("search_files", searchSchema, raw, &a)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgs) || !strings.HasPrefix(err.Error(), "invalid arguments for search_files: ") {
				t.Fatalf("bad error: %v", err)
			}
			return
		}
		// Success means the schema held: the required field was present and ranges were kept.
		if !json.Valid(raw) && len(strings.TrimSpace(string(raw))) > 0 {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
		if a.Limit < 0 || a.Limit > maxSearchLimit || a.Offset < 0 || a.Context < 0 || a.Context > maxSearchContext {
			t.Fatalf("out of range values accepted: %+v", a)
		}
	})
}
