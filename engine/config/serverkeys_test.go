package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerKeys: extra_api_keys takes plain keys and {name, key} mappings side by side, the
// admin key is read, and config show masks all of them.
func TestServerKeys(t *testing.T) {
	home := t.TempDir()
	yml := "server:\n  admin_api_key: admin-key-0123456789\n  extra_api_keys:\n    - plain-key-0123456789\n    - {name: ci, key: named-key-0123456789}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	want := []ExtraKey{{Key: "plain-key-0123456789"}, {Name: "ci", Key: "named-key-0123456789"}}
	if len(c.Server.ExtraKeys) != 2 || c.Server.ExtraKeys[0] != want[0] || c.Server.ExtraKeys[1] != want[1] || c.Server.AdminKey != "admin-key-0123456789" {
		t.Fatalf("server %+v", c.Server)
	}
	show := c.Show()
	for _, k := range []string{"plain-key-0123456789", "named-key-0123456789", "admin-key-0123456789"} {
		if strings.Contains(show, k) {
			t.Fatalf("config show prints %s:\n%s", k, show)
		}
	}
	if !strings.Contains(show, "name: ci") {
		t.Fatalf("config show drops the key name:\n%s", show)
	}
	for _, bad := range []string{
		"server:\n  extra_api_keys:\n    - {name: ci}\n",
		"server:\n  extra_api_keys:\n    - {name: ci, key: named-key-0123456789, role: admin}\n",
		"server:\n  extra_api_keys:\n    - [a, b]\n",
	} {
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(env(map[string]string{"HERMES_HOME": home})); err == nil {
			t.Fatalf("accepted:\n%s", bad)
		}
	}
}
