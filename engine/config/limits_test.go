package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The connection limits of hermes serve read from the server section; absent keys stay 0
// (the server's defaults) and a negative value is kept (it switches the limit off).
func TestLoadServerLimits(t *testing.T) {
	home := t.TempDir()
	yml := "server:\n  read_header_timeout: 5s\n  read_timeout: 90\n  write_timeout: -1\n  idle_timeout: 2m\n  max_conns: 20000\n  max_conns_per_ip: -1\n  ws_ping_interval: 15s\n  ws_pong_timeout: 10s\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server
	if time.Duration(s.ReadHeaderTimeout) != 5*time.Second || time.Duration(s.ReadTimeout) != 90*time.Second ||
		s.WriteTimeout >= 0 || time.Duration(s.IdleTimeout) != 2*time.Minute || s.MaxConns != 20000 || s.MaxConnsPerIP != -1 ||
		time.Duration(s.WSPingInterval) != 15*time.Second || time.Duration(s.WSPongTimeout) != 10*time.Second {
		t.Fatalf("server limits: %+v", s)
	}
	c, err = Load(env(map[string]string{"HERMES_HOME": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Server; s.ReadHeaderTimeout != 0 || s.MaxConns != 0 || s.WSPingInterval != 0 {
		t.Fatalf("absent limits must stay 0 (the server's defaults): %+v", s)
	}
}
