package mcptool

import (
	"encoding/json"
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
