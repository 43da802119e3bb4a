package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/internal/metrics"
	"github.com/hermes-go/hermes/internal/metrics/metricstest"
	"github.com/hermes-go/hermes/scripting"
)

type failing struct{}

func (failing) Steer(context.Context, policy.SteerInput) (policy.SteerDecision, error) {
	return policy.SteerDecision{}, errors.New("boom")
}

// TestPolicyHookMetrics: the decorated hooks are timed under the language of the script that
// decides for the session (as the dispatcher reports it, also through the decorator), a
// failing hook is counted as an error, and an unset hook stays unset.
func TestPolicyHookMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.js")
	if err := os.WriteFile(path, []byte(`export function approval(req) { return "allow"; }`), 0o600); err != nil {
		t.Fatal(err)
	}
	set, closer, err := scripting.LoadPolicy(path, scripting.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	sessions := scripting.NewSessions(policy.Set{Approver: set.Approver, Steer: failing{}}, nil)
	m := metrics.New()
	timed := m.Policy(sessions.Set())
	if empty := m.Policy(policy.Set{}); empty != (policy.Set{}) {
		t.Fatalf("unset hooks were filled: %+v", empty)
	}
	ctx := context.Background()
	for range 3 {
		if d, err := timed.Approver.Approve(ctx, policy.ApprovalInput{SessionID: "s1", Tool: "terminal"}); err != nil || d.Decision != policy.Allow {
			t.Fatalf("approve: %+v %v", d, err)
		}
	}
	if _, err := timed.Steer.Steer(ctx, policy.SteerInput{SessionID: "s1"}); err == nil {
		t.Fatal("the failing hook's error was lost")
	}
	if l := timed.Approver.(interface{ HookLang(string, string) string }).HookLang("s1", "approval"); l != "js" {
		t.Fatalf("language through the decorator: %q", l)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	f := metricstest.Scrape(t, srv.URL, "")
	if got := f.Value("hermes_policy_hook_seconds", "hook", "approval", "language", "js"); got != 3 {
		t.Errorf("approval calls timed as js: %v", got)
	}
	if got := f.Value("hermes_policy_hook_errors_total", "hook", "steer", "language", "go"); got != 1 {
		t.Errorf("steer errors: %v", got)
	}
	if got := f.Value("hermes_policy_hook_errors_total", "hook", "approval", "language", "js"); got != 0 {
		t.Errorf("approval errors: %v", got)
	}
}
