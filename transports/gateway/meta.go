package gateway

import (
	"bytes"
	"encoding/json"
)

// withoutMeta drops the top-level _meta member every method accepts (the JSON-RPC layer reads
// its W3C traceparent and tracestate; the rest is the client's own), so strict decoding does
// not refuse it as an unknown param.
func withoutMeta(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"_meta"`)) {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw // decode reports it
	}
	if _, ok := m["_meta"]; !ok {
		return raw
	}
	delete(m, "_meta")
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}
