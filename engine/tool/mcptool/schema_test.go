package mcptool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// FuzzInputSchema: whatever a server sends as a schema, a tool is offered only with a JSON
// object schema of type "object" whose properties (if any) are an object.
func FuzzInputSchema(f *testing.F) {
	for _, s := range []string{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"string"}`, `[]`, `null`, `{"type":"object","properties":[]}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := rawInputSchema(raw)
		if err != nil {
			return
		}
		var m map[string]any
		if json.Unmarshal(out, &m) != nil || m["type"] != "object" {
			t.Fatalf("accepted %q", raw)
		}
		if p, ok := m["properties"]; ok {
			if _, obj := p.(map[string]any); !obj {
				t.Fatalf("accepted properties %v", p)
			}
		}
	})
}

func TestInputSchemaRejects(t *testing.T) {
	for _, s := range []string{`{"type":"string"}`, `[]`, `null`, `{"type":"object","properties":[]}`, `{}`, ``, `  `, `{"type":7}`} {
		if _, err := rawInputSchema(json.RawMessage(s)); err == nil {
			t.Errorf("accepted %q", s)
		}
	}
	generated, err := json.Marshal(mcp.NewTool("ok", mcp.WithString("a")).InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawInputSchema(generated); err != nil {
		t.Errorf("a generated schema was rejected: %v", err)
	}
	// Accepted schemas pass through byte for byte, keywords the client library does not model
	// included.
	in := `{"type":"object","$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"type":"string"}},"additionalProperties":false,"x-extra":1}`
	if out, err := rawInputSchema(json.RawMessage(in)); err != nil || string(out) != in {
		t.Errorf("schema changed: %s (%v)", out, err)
	}
}

// FuzzDecodeToolPage: any tools/list result either fails as a whole (not a list) or yields one
// entry per element, each named, and each either invalid or decoded.
func FuzzDecodeToolPage(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"c"}`,
		`{"tools":[{"name":5},{"description":"no name"},{"name":"ok","inputSchema":{"type":"object","properties":[]}}]}`,
		`{"tools":null}`, `{"tools":{}}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		tools, _, err := decodeToolPage(raw, 0)
		if err != nil {
			return
		}
		var page struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(raw, &page) != nil || len(tools) != len(page.Tools) {
			t.Fatalf("%d entries from %q", len(tools), raw)
		}
		for _, tl := range tools {
			if tl.Name == "" {
				t.Fatalf("unnamed entry from %q", raw)
			}
		}
	})
}

func TestDecodeToolPageKeepsGoodEntries(t *testing.T) {
	tools, next, err := decodeToolPage(json.RawMessage(`{"tools":[{"name":5},{"name":"ok","inputSchema":{"type":"object","x-keep":true}}],"nextCursor":"p2"}`), 3)
	if err != nil || next != "p2" || len(tools) != 2 {
		t.Fatalf("%+v %q %v", tools, next, err)
	}
	if tools[0].Name != "#4" || !strings.Contains(tools[0].invalid, "malformed tool entry") {
		t.Errorf("bad entry %+v", tools[0])
	}
	if tools[1].Name != "ok" || tools[1].invalid != "" || string(tools[1].InputSchema) != `{"type":"object","x-keep":true}` {
		t.Errorf("good entry %+v", tools[1])
	}
}
