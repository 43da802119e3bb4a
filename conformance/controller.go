package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/fasthttp/websocket"
)

// Controllers is an optional Server ability: a step {"controller": {"capabilities": […]}}
// registers a browser controller with the key the server was started with and connects it
// (POST /v1/browser-control/register, GET /v1/browser-control/ws). The controller answers
// every command {"ok": true, "content": "controller: <action> <arguments as JSON>"}, so the
// turn's tool result shows what it was asked; the step records the registration response.
type Controllers interface {
	Controller(ctx context.Context, capabilities []string) (map[string]any, error)
}

// controller is one connected test controller; its reader answers commands until closed.
type controller struct {
	c    *websocket.Conn
	done sync.WaitGroup
}

func (s *wsServer) Controller(ctx context.Context, capabilities []string) (map[string]any, error) {
	if s.proc == nil {
		return nil, fmt.Errorf("a browser controller needs a server this run started")
	}
	base := "http://" + s.proc.addr
	body, _ := json.Marshal(map[string]any{"capabilities": capabilities})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/browser-control/register", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+serveKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var reg map[string]any
	if err := json.Unmarshal(raw, &reg); err != nil || res.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("register a browser controller: %d %s", res.StatusCode, raw)
	}
	id, _ := reg["controller_id"].(string)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+serveKey)
	c, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+s.proc.addr+"/v1/browser-control/ws?controller_id="+id, h)
	if err != nil {
		return nil, fmt.Errorf("connect the browser controller: %w", err)
	}
	var ready map[string]any
	if err := c.ReadJSON(&ready); err != nil || ready["type"] != "browser.controller.ready" {
		c.Close()
		return nil, fmt.Errorf("browser controller: no ready frame (%v)", err)
	}
	ctl := &controller{c: c}
	ctl.done.Go(func() {
		for {
			var m map[string]any
			if err := c.ReadJSON(&m); err != nil {
				return
			}
			if m["type"] != "browser.controller.command" {
				continue
			}
			args, _ := json.Marshal(m["arguments"])
			_ = c.WriteJSON(map[string]any{"type": "browser.controller.result", "command_id": m["command_id"], "ok": true,
				"content": fmt.Sprintf("controller: %v %s", m["action"], args)})
		}
	})
	s.mu.Lock()
	s.ctls = append(s.ctls, ctl)
	s.mu.Unlock()
	return reg, nil
}

// closeControllers disconnects the controllers a fixture connected.
func (s *wsServer) closeControllers() {
	s.mu.Lock()
	ctls := s.ctls
	s.ctls = nil
	s.mu.Unlock()
	for _, ctl := range ctls {
		ctl.c.Close()
		ctl.done.Wait()
	}
}
