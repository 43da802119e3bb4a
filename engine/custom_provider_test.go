package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
)

// The reference's names of custom endpoints: custom:<name>:<model> is the saved endpoint
// <name> (a provider of config.yaml), custom:<model> the provider named custom. No catalogue
// refuses a name on them.
func TestCustomEndpointNames(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	prov := func() model.Provider {
		return anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "k", MaxRetries: -1, Backoff: func(int) time.Duration { return 0 }})
	}
	h := enginetest.New(t, enginetest.Options{Memory: true, Configure: func(c *engine.Config) {
		c.Providers["anthropic"] = prov()
		c.Providers["lab"] = prov()
		c.DefaultModel = "anthropic:claude-sonnet-4-5"
	}})
	for in, want := range map[string]string{
		"custom:lab:gpt-5.5":      "lab:gpt-5.5",
		"custom:lab:house-model":  "lab:house-model",
		"lab:gpt-5.5":             "lab:gpt-5.5",
		"anthropic:claude-next-7": "anthropic:claude-next-7",
	} {
		if got, _, err := h.Engine.ResolveModel(in); err != nil || got != want {
			t.Errorf("ResolveModel(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"custom:nosuch:x", "custom:my-model"} {
		_, _, err := h.Engine.ResolveModel(in)
		if !errors.Is(err, model.ErrUnknownProvider) || !strings.Contains(err.Error(), "custom:<name>:<model>") {
			t.Errorf("ResolveModel(%s): %v", in, err)
		}
	}
	s := h.Create()
	if m, err := s.SetModel(context.Background(), "custom:lab:house-model"); err != nil || m != "lab:house-model" || s.Record().Model != "lab:house-model" {
		t.Fatalf("/model custom:lab:house-model = %s, %v (session on %s)", m, err, s.Record().Model)
	}
	srv.Enqueue(anthropictest.Response{Text: []string{"from the lab"}})
	if out := h.Run(s, "hi"); out.Status != engine.StatusCompleted || out.Text != "from the lab" {
		t.Fatalf("outcome %+v", out)
	}

	// A provider named custom serves custom:<model>.
	h2 := enginetest.New(t, enginetest.Options{Memory: true, Configure: func(c *engine.Config) {
		c.Providers["custom"] = prov()
		c.DefaultModel = "custom:qwen-2.5"
	}})
	if got, _, err := h2.Engine.ResolveModel("custom:my-model"); err != nil || got != "custom:my-model" {
		t.Errorf("ResolveModel(custom:my-model) with a provider named custom = %s, %v", got, err)
	}
}
