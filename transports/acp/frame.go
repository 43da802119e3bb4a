package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// lockedWriter serializes whole frames: the SDK writes one complete line per Write call, and
// the input guard writes its own error responses to the same stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// JSON-RPC error codes the guard answers with itself.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// guard copies well-formed lines from in to out and answers the rest itself. The SDK skips
// unparseable lines silently and closes the connection on a line longer than its scanner
// buffer; a client deserves an error for both, and the agent must survive them.
func guard(in io.Reader, out io.Writer, reply io.Writer, maxLine int) error {
	r := bufio.NewReaderSize(in, 64*1024)
	for {
		line, over, err := readLine(r, maxLine)
		if len(line) > 0 || over {
			switch {
			case over:
				writeError(reply, idOf(line), codeInvalidRequest, "message too large")
			case len(bytes.TrimSpace(line)) == 0:
			case !json.Valid(line):
				writeError(reply, nil, codeParseError, "parse error")
			default:
				fixed, shape := normalize(line)
				if shape != "" {
					writeError(reply, idOf(line), codeInvalidRequest, shape)
					break
				}
				if _, werr := out.Write(append(fixed, '\n')); werr != nil {
					return werr
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readLine reads one newline-terminated line. When the line exceeds max it keeps only a
// prefix (enough to find the request id) and drains the rest, so memory stays bounded.
func readLine(r *bufio.Reader, max int) (line []byte, over bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if !over {
			if len(line)+len(frag) > max {
				over = true
				keep := min(len(frag), 256-min(len(line), 256))
				line = append(line, frag[:keep]...)
			} else {
				line = append(line, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), over, err
	}
}

// normalize rejects JSON that is valid but not a JSON-RPC object (arrays, scalars), which
// the SDK would drop without a word. It also supplies the mcpServers list some clients omit
// from session/new and session/load: v1 requires it, but refusing the session over an empty
// list helps nobody.
func normalize(line []byte) ([]byte, string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, "a message must be a JSON object"
	}
	method, ok := m["method"]
	if !ok {
		if _, ok := m["id"]; !ok {
			return nil, "a message needs a method or an id"
		}
		return line, ""
	}
	if s := string(method); s != `"session/new"` && s != `"session/load"` {
		return line, ""
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(m["params"], &params) != nil || params == nil {
		return line, "" // the SDK reports bad params
	}
	if v, ok := params["mcpServers"]; ok && string(v) != "null" {
		return line, ""
	}
	params["mcpServers"] = json.RawMessage("[]")
	m["params"], _ = json.Marshal(params)
	fixed, err := json.Marshal(m)
	if err != nil {
		return line, ""
	}
	return fixed, ""
}

// idOf finds the request id in a (possibly truncated) frame: a full parse when the line is
// whole, else a scan of the prefix, where clients put "id" first or second.
func idOf(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) == nil {
		return scalarID(m.ID)
	}
	i := bytes.Index(line, []byte(`"id"`))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(line[i+4:], " \t:")
	dec := json.NewDecoder(bytes.NewReader(rest))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return nil
	}
	return scalarID(raw)
}

// scalarID keeps an id only when it is a string or a number, as JSON-RPC requires.
func scalarID(raw json.RawMessage) json.RawMessage {
	if len(raw) > 0 && (raw[0] == '"' || raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return raw
	}
	return nil
}

func writeError(w io.Writer, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	_, _ = w.Write(append(b, '\n'))
}
