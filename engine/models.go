package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/catalog"
)

// ModelMismatchError refuses a model name the catalogue knows to belong to another provider.
// It matches ErrInvalidModel (errors.Is) and carries the catalogue's verdict, so a surface can
// report the model, the provider and the suggestions as data.
type ModelMismatchError struct{ *catalog.Mismatch }

func (e *ModelMismatchError) Error() string {
	return ErrInvalidModel.Error() + ": " + e.Mismatch.Error()
}

func (e *ModelMismatchError) Is(target error) bool { return target == ErrInvalidModel }

// ModelNameError refuses a model name ResolveModel cannot use for a reason other than the
// catalogue's (ModelMismatchError): an unknown provider, a name without a model part or with a
// space or control character. It carries the name and the provider it resolved to, and, for an
// unknown provider, the configured providers as suggestions; errors.Is matches Err's sentinel
// (ErrInvalidModel or model.ErrUnknownProvider).
type ModelNameError struct {
	Model       string
	Provider    string
	Suggestions []string
	Err         error
}

func (e *ModelNameError) Error() string { return e.Err.Error() }

// unservedError is a model its provider refused to serve (model.Checker): an invalid model to
// every surface, said as what it is; a turn whose model it is fails with the provider's error.
type unservedError struct {
	model string
	err   error
}

func (e *unservedError) Error() string {
	return "model " + e.model + " cannot be used: " + e.err.Error()
}
func (e *unservedError) Unwrap() error        { return e.err }
func (e *unservedError) Is(target error) bool { return target == ErrInvalidModel }

func (e *ModelNameError) Unwrap() error { return e.Err }

// Catalog returns the model catalogue the engine checks names against and prices calls with.
func (e *Engine) Catalog() *catalog.Catalog { return e.catalog() }

func (e *Engine) catalog() *catalog.Catalog {
	if e.cfg.Catalog != nil {
		return e.cfg.Catalog
	}
	return defaultCatalog()
}

// defaultCatalog parses the embedded catalogue on first use, not at package initialisation:
// every hermes command starts through this package's init, and most need no catalogue before
// their first turn (`hermes acp` answers initialize without one).
var defaultCatalog = sync.OnceValue(catalog.Default)

// checkModel applies the catalogue to provider prov and model m: a name known to belong to
// another provider is refused; any other is returned in the provider's form.
func (e *Engine) checkModel(prov, m string) (string, error) {
	cat := e.catalog()
	if mm := cat.Check(prov, m); mm != nil {
		return "", &ModelMismatchError{mm}
	}
	return cat.Resolve(prov, m), nil
}

// routed is the provider ResolveModel hands out: it prices each call's usage at the
// catalogue's prices for the model that served it, and when the call fails in a way another
// attempt could cure (a retryable provider error after the provider's own retries, or an
// unreachable endpoint) before any chunk arrived, it moves on to the next model of the
// engine's fallback list, announcing the switch with a Fallback chunk. A failure after chunks
// arrived is reported as it is: part of the answer has been seen and acted on.
type routed struct {
	e    *Engine
	name string // provider:model
	prov model.Provider
}

func (r *routed) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		name, prov := r.name, r.prov
		tried := []string{name}
		for {
			pname, m := model.ParseName(name)
			req.Model = m
			price, priced := r.e.catalog().Lookup(pname, m)
			yielded := false
			var failure error
			for c, err := range prov.Stream(ctx, req) {
				if err != nil {
					failure = err
					break
				}
				if c.Usage != nil && priced {
					u := *c.Usage
					u.CostUSD = price.Cost(u)
					c.Usage = &u
				}
				yielded = true
				if !yield(c, nil) {
					return
				}
			}
			if failure == nil {
				return
			}
			if yielded || ctx.Err() != nil || !model.Retryable(failure) {
				yield(model.Chunk{}, failure)
				return
			}
			next, nprov := r.next(tried)
			if nprov == nil {
				if len(tried) > 1 {
					failure = fmt.Errorf("%w (fallback models tried: %s)", failure, strings.Join(tried, ", "))
				}
				yield(model.Chunk{}, failure)
				return
			}
			if !yield(model.Chunk{Fallback: &model.Fallback{From: name, To: next, Reason: failure.Error()}}, nil) {
				return
			}
			tried = append(tried, next)
			name, prov = next, nprov
		}
	}
}

// next is the first fallback model not tried yet that resolves, or nil.
func (r *routed) next(tried []string) (string, model.Provider) {
	for _, f := range r.e.cfg.FallbackModels {
		name, p, err := r.e.resolveDirect(f)
		if err != nil || p == nil {
			continue
		}
		dup := false
		for _, t := range tried {
			dup = dup || t == name
		}
		if !dup {
			return name, p
		}
	}
	return "", nil
}

// resolveDirect resolves a fallback model name to its canonical name and bare provider.
func (e *Engine) resolveDirect(name string) (string, model.Provider, error) {
	prov, m := e.customEndpoint(model.ParseName(strings.TrimSpace(name)))
	if prov == "" {
		prov, _ = model.ParseName(e.cfg.DefaultModel)
	}
	p, ok := e.cfg.Providers[prov]
	if !ok || m == "" {
		return "", nil, errors.New("unresolvable fallback model " + name)
	}
	m, err := e.checkModel(prov, m)
	if err != nil {
		return "", nil, err
	}
	return prov + ":" + m, p, nil
}

// customEndpoint maps the reference's names of custom endpoints onto the configured
// providers: "custom:<name>:<model>" is <name>:<model> when <name> is a configured provider (a
// saved endpoint of config.yaml), and "custom:<model>" is the provider named custom when one
// is configured (else it stays unknown, with customHint saying how to configure one).
func (e *Engine) customEndpoint(prov, m string) (string, string) {
	if prov != "custom" {
		return prov, m
	}
	if name, rest := model.ParseName(m); name != "" {
		if _, ok := e.cfg.Providers[name]; ok {
			return name, rest
		}
	}
	return prov, m
}

// customHint explains an unknown provider named custom.
func customHint(prov string) string {
	if prov != "custom" {
		return ""
	}
	return "; a custom endpoint is a provider of config.yaml: custom:<name>:<model> names provider <name>, custom:<model> a provider named custom"
}
