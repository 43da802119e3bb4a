package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/transports/mcpserver"
)

// Over stdio every message is either served or answered in JSON-RPC's own form, and what is
// not a request is never answered: the cases mcp-go alone got wrong (ids it echoed with a
// result, valid JSON it called a parse error, a message with neither method nor result it
// called an unknown method, array params it called an invalid request) and a line over the
// frame limit. Each answer is checked in order, right after its line: a request following a
// refused one is still served.
func TestStdioGuard(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, enginetest.Options{Configure: func(c *engine.Config) { c.Tools = nil }})
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- mcpserver.New(h.Engine, mcpserver.Options{Version: "test"}).ServeStdio(context.Background(), toServer, fromServer)
		fromServer.Close()
	}()
	// The answers are read as they come (the pipes hold nothing: a writer waits for its reader).
	answers := make(chan []byte, 64)
	go func() {
		defer close(answers)
		lines := bufio.NewScanner(toClient)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			answers <- append([]byte(nil), lines.Bytes()...)
		}
	}()
	send := func(s string) {
		t.Helper()
		if _, err := fromClient.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		t.Helper()
		var line []byte
		select {
		case l, ok := <-answers:
			if !ok {
				t.Fatal("the output ended")
			}
			line = l
		case <-ctxT(t).Done():
			t.Fatal("no answer")
		}
		if !utf8.Valid(line) {
			t.Fatalf("answer is not UTF-8: %q", line)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("answer is not JSON: %q", line)
		}
		return m
	}
	expect := func(in string, id any, code float64) {
		t.Helper()
		send(in)
		// A ping after it shows anything the guard let through or answered comes first.
		send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
		m := next()
		e, _ := m["error"].(map[string]any)
		if code == 0 {
			if m["id"] != "after" || m["result"] == nil {
				t.Fatalf("%s: answered %v, want nothing", in, m)
			}
			return
		}
		if m["id"] != id || e == nil || e["code"] != code {
			t.Fatalf("%s: answered %v, want error %v with id %v", in, m, code, id)
		}
		if a := next(); a["id"] != "after" || a["result"] == nil {
			t.Fatalf("%s: the next request got %v", in, a)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := next(); m["id"] != float64(0) || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	expect(`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, nil, -32600)
	expect(`{"jsonrpc":"2.0","id":true,"method":"ping"}`, nil, -32600)
	expect(`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, nil, -32600)
	expect(`{"jsonrpc":"2.0","id":null,"method":"ping"}`, nil, -32600)
	expect(`5`, nil, -32600)
	expect(`[]`, nil, -32600)
	expect(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, nil, -32600)
	expect(`{"jsonrpc":"2.0","id":5}`, float64(5), -32600)
	expect(`{"jsonrpc":"1.0","id":6,"method":"ping"}`, float64(6), -32600)
	expect(`{"id":7,"method":"ping"}`, float64(7), -32600)
	expect(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":[1]}`, float64(8), -32602)
	expect(`{"jsonrpc":"2.0","id":"\xff","method":"ping"}`, nil, -32700)
	expect(`{"jsonrpc":"2.0","id":9,`, nil, -32700)
	expect(`{"jsonrpc":"2.0","id":10,"method":"ping","params":`+strings.Repeat(" ", 17<<20)+`{}}`, nil, -32600)
	send(`{"jsonrpc":"2.0","id":11,"method":"ping","params":null}`) // null params: none
	if m := next(); m["id"] != float64(11) || m["result"] == nil {
		t.Fatalf("ping with params null: %v", m)
	}
	// Never answered: notifications, even invalid ones, and responses.
	expect(`{"jsonrpc":"1.0","method":"notifications/cancelled"}`, nil, 0)
	expect(`{"jsonrpc":"2.0","method":"notifications/x","params":[1]}`, nil, 0)
	expect(`{"jsonrpc":"2.0","id":"r1","result":{}}`, nil, 0)
	// A valid request still passes: a string id, no params.
	send(`{"jsonrpc":"2.0","id":"s","method":"tools/list"}`)
	if m := next(); m["id"] != "s" || m["result"] == nil {
		t.Fatalf("tools/list: %v", m)
	}

	fromClient.Close()
	if err := <-served; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
}
