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
		out, err := inputSchema(mcp.Tool{Name: "x", RawInputSchema: raw})
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
	for _, s := range []string{`{"type":"string"}`, `[]`, `null`, `{"type":"object","properties":[]}`, `{}`} {
		if _, err := inputSchema(mcp.Tool{Name: "x", RawInputSchema: json.RawMessage(s)}); err == nil {
			t.Errorf("accepted %s", s)
		}
	}
	if _, err := inputSchema(mcp.NewTool("ok", mcp.WithString("a"))); err != nil {
		t.Errorf("a generated schema was rejected: %v", err)
	}
}
