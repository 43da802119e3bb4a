package cli

import (
	"context"
	"fmt"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/policy"
)

// checkPolicy loads the policy file in effect and checks its examples, as hermes policy test
// does.
func checkPolicy(ctx context.Context, rep *doctorReport, cfg *config.Config) {
	path, err := policyPath(cfg)
	if err != nil {
		rep.add(doctorCheck{Area: "policy", Name: "policy", Status: statusFail, Detail: err.Error(), Fix: "remove one policy file, or choose one with HERMES_POLICY"})
		return
	}
	if path == "" {
		rep.add(doctorCheck{Area: "policy", Name: "policy", Status: statusOK, Detail: "no policy file; the built-in approval rules apply"})
		return
	}
	c := doctorCheck{Area: "policy", Name: path, Status: statusOK}
	o, err := policyOptions(cfg, toolRegistry(cfg), policy.Set{})
	if err != nil {
		c.Status, c.Detail, c.Fix = statusFail, err.Error(), "fix scripts: in config.yaml"
		rep.add(c)
		return
	}
	o.SkipExamples = true
	results, err := policyExamples(ctx, o, path)
	if err != nil {
		c.Status, c.Detail = statusFail, "does not load: "+err.Error()
		c.Fix = "fix the policy (hermes policy test " + path + "), or point HERMES_POLICY / policy: at the right file"
		rep.add(c)
		return
	}
	failed := 0
	for _, r := range results {
		if !r.Pass {
			failed++
			c.More = append(c.More, r.String())
		}
	}
	c.Detail = fmt.Sprintf("loads; %d of %d examples pass", len(results)-failed, len(results))
	switch {
	case failed > 0:
		c.Status, c.Fix = statusFail, "fix the policy or its examples: hermes policy test -v "+path
	case len(results) == 0:
		c.Status, c.Detail = statusWarn, "loads, but has no examples to check"
		c.Fix = "add examples to the policy so its decisions are tested (see hermes policy test)"
	}
	rep.add(c)
}
