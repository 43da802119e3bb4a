package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// A store that cannot be reached for now (its database restarting) is a 503 with Retry-After in
// the OpenAI error form, wherever the error comes from: a handler's own store call (storeErr)
// or an engine verb (wire.Classify), or a turn whose writes it refused.
func TestStoreUnavailableIs503(t *testing.T) {
	down := fmt.Errorf("%w: dial tcp 127.0.0.1:5432: connect: connection refused", engine.ErrStoreUnavailable)
	app := fiber.New()
	app.Get("/engine", func(c *fiber.Ctx) error { return writeError(c, fmt.Errorf("append rows: %w", down)) })
	app.Get("/handler", func(c *fiber.Ctx) error { return writeError(c, storeErr(down, "s1")) })
	// A turn the outage ended (a write of the turn failed): the chat routes' 409 turn_failed
	// and the session chat's 502 are for turns that failed on their own.
	outage := engine.Outcome{Status: engine.StatusFailed, ExitReason: "store_error", Error: "save usage: " + down.Error()}
	app.Get("/turn", func(c *fiber.Ctx) error { return writeError(c, turnError(outage)) })
	app.Get("/outcome", func(c *fiber.Ctx) error { return writeError(c, wire.OutcomeError(outage)) })
	if failedTurn(outage) {
		t.Fatal("a turn a store outage ended is remembered as failed (replayed instead of run again)")
	}
	other := engine.Outcome{Status: engine.StatusFailed, ExitReason: "store_error", Error: "append rows: invalid record"}
	if e := turnError(other); e.Status != 409 || !failedTurn(other) {
		t.Fatalf("a turn another store error ended: %d %+v", e.Status, e)
	}
	for _, path := range []string{"/engine", "/handler", "/turn", "/outcome"} {
		res, err := app.Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		var env struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    string  `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("%s: %s: %v", path, body, err)
		}
		if strings.Contains(env.Error.Message, "127.0.0.1") || !strings.Contains(env.Error.Message, "store unavailable") {
			t.Fatalf("%s: the message %q names the store's address, or not its outage", path, env.Error.Message)
		}
		if res.StatusCode != 503 || res.Header.Get("Retry-After") != "2" || res.Header.Get("x-should-retry") != "" ||
			env.Error.Type != "server_error" || env.Error.Code != "session_db_unavailable" || env.Error.Param != nil {
			t.Fatalf("%s: %d Retry-After %q x-should-retry %q %s", path, res.StatusCode, res.Header.Get("Retry-After"),
				res.Header.Get("x-should-retry"), body)
		}
	}
}

// What the client is not told of an outage, the operator reads in the node's log: the cause
// is kept on the 503 a handler returns, and the error handler logs it.
func TestStoreUnavailableCauseLogged(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil))}
	app := fiber.New(fiber.Config{ErrorHandler: s.errorHandler})
	down := fmt.Errorf("%w: dial tcp 127.0.0.1:5432: connect: connection refused", engine.ErrStoreUnavailable)
	app.Get("/handler", func(*fiber.Ctx) error { return storeErr(down, "s1") })
	app.Get("/engine", func(*fiber.Ctx) error { return fmt.Errorf("append rows: %w", down) })
	for _, path := range []string{"/handler", "/engine"} {
		buf.Reset()
		res, err := app.Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 503 || strings.Contains(string(body), "127.0.0.1") {
			t.Fatalf("%s: %d %s", path, res.StatusCode, body)
		}
		if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "127.0.0.1:5432") || !strings.Contains(out, path) {
			t.Fatalf("%s: the outage's cause is not logged: %q", path, out)
		}
	}
}
