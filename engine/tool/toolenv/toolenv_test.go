package toolenv_test

import (
	"slices"
	"testing"

	"github.com/hermes-go/hermes/engine/tool/toolenv"
)

func TestFilter(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "HOME=/home/u", "LC_ALL=C", "PWD=/parent", "OPENAI_API_KEY=sk-1",
		"HERMES_API_KEY=hk-1", "CUSTOM_PROVIDER_KEY=c-1", "AWS_REGION=eu", "AWS_SECRET_ACCESS_KEY=a-1",
		"SSH_AUTH_SOCK=/tmp/agent", "MY_TOOL_TOKEN=m-1", "UNRELATED=x", "=weird", "noequals",
	}
	p := toolenv.Policy{
		Passthrough: []string{"MY_TOOL_TOKEN", "AWS_*", "CUSTOM_*", "OPENAI_*"},
		Secret:      []string{"CUSTOM_PROVIDER_KEY"},
	}
	got := p.Filter(environ, "/srv/project", map[string]string{"EXTRA": "1", "PATH": "/opt/bin"})
	want := []string{
		"AWS_REGION=eu", "AWS_SECRET_ACCESS_KEY=a-1", "EXTRA=1", "HOME=/home/u", "LC_ALL=C",
		"MY_TOOL_TOKEN=m-1", "PATH=/opt/bin", "PWD=/srv/project",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Filter:\n got %q\nwant %q", got, want)
	}

	// The zero policy passes the allow-list only; an exact name releases a secret.
	if got := (toolenv.Policy{}).Filter(environ, "", nil); !slices.Equal(got, []string{"HOME=/home/u", "LC_ALL=C", "PATH=/usr/bin"}) {
		t.Fatalf("zero policy: %q", got)
	}
	if got := (toolenv.Policy{Passthrough: []string{"*", "HERMES_API_KEY"}}).Filter(environ, "", nil); !slices.Contains(got, "HERMES_API_KEY=hk-1") ||
		slices.Contains(got, "OPENAI_API_KEY=sk-1") || !slices.Contains(got, "UNRELATED=x") {
		t.Fatalf("* and an exact secret name: %q", got)
	}
	if got := (toolenv.Policy{}).Filter(nil, "", nil); got == nil {
		t.Fatal("an empty environment must be an empty, non-nil list (nil means inherit everything)")
	}
}
