package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadYAML(t *testing.T, yml string) (*Config, error) {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(env(map[string]string{"HERMES_HOME": home}))
}

// The compression section and the tool output budgets are read, checked, and turned into the
// engine's settings (automatic compaction off is a negative threshold).
func TestLoadCompressionAndOutputBudgets(t *testing.T) {
	c, err := loadYAML(t, "compression:\n  threshold: 0.8\n  context_window: 32000\ntools:\n  output_budget: 20000\n  output_budgets:\n    read_file: 100000\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Compression.CompactThreshold() != 0.8 || c.Compression.ContextWindow != 32000 || c.Tools.OutputBudget != 20000 || c.Tools.OutputBudgets["read_file"] != 100000 {
		t.Fatalf("%+v %+v", c.Compression, c.Tools)
	}
	c, err = loadYAML(t, "compression:\n  enabled: false\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Compression.CompactThreshold() >= 0 {
		t.Fatalf("disabled compaction gave threshold %v", c.Compression.CompactThreshold())
	}
	c, err = loadYAML(t, "model: openai:x\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Compression.CompactThreshold() != 0.5 || c.Compression.ContextWindow != 128000 || c.Compression.Enabled == nil || !*c.Compression.Enabled {
		t.Fatalf("defaults: %+v", c.Compression)
	}
	for yml, want := range map[string]string{
		"compression:\n  threshold: 1.5\n":         "compression.threshold",
		"compression:\n  threshold: -0.2\n":        "compression.threshold",
		"compression:\n  context_window: -1\n":     "compression.context_window",
		"tools:\n  output_budget: -5\n":            "tools.output_budget",
		"tools:\n  output_budgets:\n    grep: 0\n": "tools.output_budgets.grep",
	} {
		if _, err := loadYAML(t, yml); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", yml, err, want)
		}
	}
}
