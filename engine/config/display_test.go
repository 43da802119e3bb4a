package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/config"
)

func loadYAML(t *testing.T, yml string) (*config.Config, error) {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(func(k string) string {
		if k == "HERMES_HOME" {
			return home
		}
		return ""
	})
}

// The reference's display.busy_input_mode loads as busy_input_mode; the two spellings may
// agree but not disagree.
func TestDisplayBusyInputMode(t *testing.T) {
	c, err := loadYAML(t, "display:\n  busy_input_mode: queue\n")
	if err != nil || c.BusyInputMode != "queue" {
		t.Fatalf("display.busy_input_mode: %v %+v", err, c)
	}
	if c, err = loadYAML(t, "busy_input_mode: steer\ndisplay:\n  busy_input_mode: steer\n"); err != nil || c.BusyInputMode != "steer" {
		t.Fatalf("both, agreeing: %v", err)
	}
	if _, err = loadYAML(t, "busy_input_mode: steer\ndisplay:\n  busy_input_mode: queue\n"); err == nil || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("both, disagreeing: %v", err)
	}
	if _, err = loadYAML(t, "display:\n  skin: dark\n"); err == nil {
		t.Fatal("an unknown display key must still be an error")
	}
}
