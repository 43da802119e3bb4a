// Package catalog is the model catalogue: which model families each provider serves, which
// providers are aggregators, and each known model's limits, capabilities and prices. The data
// is embedded (catalog.yaml) and overridable per provider from configuration, so it is data, not
// code. The engine uses it to refuse a model name known to belong to another provider (with
// suggestions from the requested provider's catalogue), to resolve a name to the form the
// provider expects, and to price each model call; model pickers show its limits and prices.
package catalog

import (
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/internal/textdist"
)

//go:embed catalog.yaml
var embedded []byte

// Pricing is a model's list price in USD per million tokens. CacheRead and CacheWrite price
// the tokens read from and written to the prompt cache; zero means they cost what Input does.
type Pricing struct {
	Input      float64 `yaml:"input" json:"input"`
	Output     float64 `yaml:"output" json:"output"`
	CacheRead  float64 `yaml:"cache_read,omitempty" json:"cache_read,omitempty"`
	CacheWrite float64 `yaml:"cache_write,omitempty" json:"cache_write,omitempty"`
}

// Model is one catalogue entry. Zero limits are unknown.
type Model struct {
	ID            string   `yaml:"id" json:"id"`
	Aliases       []string `yaml:"aliases,omitempty" json:"aliases,omitempty"`
	ContextWindow int      `yaml:"context_window,omitempty" json:"context_window,omitempty"`
	MaxOutput     int      `yaml:"max_output,omitempty" json:"max_output,omitempty"`
	Tools         bool     `yaml:"tools,omitempty" json:"tools"`
	Vision        bool     `yaml:"vision,omitempty" json:"vision"`
	Reasoning     bool     `yaml:"reasoning,omitempty" json:"reasoning"`
	Pricing       *Pricing `yaml:"pricing,omitempty" json:"pricing,omitempty"`
}

// Cost is what usage u cost at m's prices, in USD; 0 when m has no pricing.
func (m Model) Cost(u model.Usage) float64 {
	p := m.Pricing
	if p == nil {
		return 0
	}
	read, write := p.CacheRead, p.CacheWrite
	if read == 0 {
		read = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	uncached := max(u.PromptTokens-u.CachedTokens-u.CacheWriteTokens, 0)
	return (float64(uncached)*p.Input + float64(u.CachedTokens)*read + float64(u.CacheWriteTokens)*write +
		float64(u.CompletionTokens)*p.Output) / 1e6
}

// Provider is one provider's catalogue.
type Provider struct {
	// Families are the model names the provider owns: "claude-" (a prefix, ending in "-") or
	// "o3" (the name itself, or followed by "-").
	Families []string `yaml:"families,omitempty"`
	// Aggregator marks a provider serving other vendors' models ("anthropic/claude-…"): it
	// accepts any name.
	Aggregator bool    `yaml:"aggregator,omitempty"`
	Models     []Model `yaml:"models,omitempty"`
}

// Catalog is the whole catalogue. It is safe for concurrent use once built.
type Catalog struct {
	Version     int                  `yaml:"version"`
	PricingAsOf string               `yaml:"pricing_as_of,omitempty"`
	Providers   map[string]*Provider `yaml:"providers"`
}

// Parse reads a catalogue document.
func Parse(data []byte) (*Catalog, error) {
	var c Catalog
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("model catalogue: %w", err)
	}
	if c.Version != 1 {
		return nil, fmt.Errorf("model catalogue: version %d (want 1)", c.Version)
	}
	for name, p := range c.Providers {
		if p == nil {
			return nil, fmt.Errorf("model catalogue: provider %s is empty", name)
		}
		for i, m := range p.Models {
			if m.ID == "" {
				return nil, fmt.Errorf("model catalogue: provider %s: models[%d] has no id", name, i)
			}
		}
	}
	return &c, nil
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
)

// Default returns a copy of the embedded catalogue; callers may override it freely.
func Default() *Catalog {
	defaultOnce.Do(func() {
		c, err := Parse(embedded)
		if err != nil {
			panic(err) // the embedded file is tested
		}
		defaultCat = c
	})
	return defaultCat.clone()
}

func (c *Catalog) clone() *Catalog {
	out := &Catalog{Version: c.Version, PricingAsOf: c.PricingAsOf, Providers: map[string]*Provider{}}
	for k, p := range c.Providers {
		cp := *p
		cp.Families = slices.Clone(p.Families)
		cp.Models = slices.Clone(p.Models)
		out.Providers[k] = &cp
	}
	return out
}

// Override merges configuration into provider name's catalogue: families replace the
// catalogue's when given, aggregator is set when true, and each model replaces the entry with
// its id (or is added). A provider the catalogue does not know gets a catalogue of its own.
func (c *Catalog) Override(name string, families []string, aggregator bool, models []Model) {
	if c.Providers == nil {
		c.Providers = map[string]*Provider{}
	}
	p := c.Providers[name]
	if p == nil {
		p = &Provider{}
		c.Providers[name] = p
	}
	if len(families) > 0 {
		p.Families = slices.Clone(families)
	}
	if aggregator {
		p.Aggregator = true
	}
	for _, m := range models {
		if i := slices.IndexFunc(p.Models, func(x Model) bool { return x.ID == m.ID }); i >= 0 {
			p.Models[i] = m
		} else {
			p.Models = append(p.Models, m)
		}
	}
}

// Lookup finds a model by provider and name: its id or an alias, "." and "-" taken as the
// same (claude-sonnet-4.5 is claude-sonnet-4-5). On an aggregator a "vendor/model" name is
// looked up in the vendor's catalogue, or any catalogue when the vendor is not one.
func (c *Catalog) Lookup(provider, name string) (Model, bool) {
	if c == nil {
		return Model{}, false
	}
	p := c.Providers[provider]
	if p != nil {
		if m, ok := p.find(name); ok {
			return m, true
		}
	}
	if p == nil || !p.Aggregator {
		return Model{}, false
	}
	vendor, bare, ok := strings.Cut(name, "/")
	if !ok {
		return Model{}, false
	}
	if vp := c.Providers[vendor]; vp != nil {
		return vp.find(bare)
	}
	for _, k := range c.names() {
		if m, ok := c.Providers[k].find(bare); ok {
			return m, true
		}
	}
	return Model{}, false
}

func (p *Provider) find(name string) (Model, bool) {
	key := normal(name)
	for _, m := range p.Models {
		if normal(m.ID) == key {
			return m, true
		}
		for _, a := range m.Aliases {
			if normal(a) == key {
				return m, true
			}
		}
	}
	return Model{}, false
}

func normal(s string) string { return strings.ReplaceAll(strings.ToLower(s), ".", "-") }

// owns reports whether name is in one of p's families.
func (p *Provider) owns(name string) bool {
	name = strings.ToLower(name)
	for _, f := range p.Families {
		f = strings.ToLower(f)
		if strings.HasSuffix(f, "-") && strings.HasPrefix(name, f) || name == f || strings.HasPrefix(name, f+"-") {
			return true
		}
	}
	return false
}

func (c *Catalog) names() []string {
	out := make([]string, 0, len(c.Providers))
	for k := range c.Providers {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Owner is the provider whose families hold name ("" when none does). A "vendor/model" name
// is judged by its model part.
func (c *Catalog) Owner(name string) string {
	if c == nil {
		return ""
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	for _, k := range c.names() {
		if p := c.Providers[k]; !p.Aggregator && p.owns(name) {
			return k
		}
	}
	return ""
}

// Mismatch is the refusal of a model name known to belong to another provider.
type Mismatch struct {
	Model       string   // the name as asked
	Provider    string   // the provider asked for
	Owner       string   // the provider the name belongs to
	Suggestions []string // up to five of Provider's models, closest first
}

func (m *Mismatch) Error() string {
	msg := fmt.Sprintf("model %q belongs to provider %s, not %s (use %s:%s)", m.Model, m.Owner, m.Provider, m.Owner, m.Model)
	if len(m.Suggestions) > 0 {
		msg += "; " + m.Provider + " models: " + strings.Join(m.Suggestions, ", ")
	}
	return msg
}

// Check refuses name on provider only when it is known to belong to another provider: the
// provider has families, the name is not in them, and another provider's families hold it.
// Aggregators, providers without a catalogue (custom endpoints, local servers), names of the
// provider's own families the catalogue has not caught up with, and names no catalogue knows
// are all accepted.
func (c *Catalog) Check(provider, name string) *Mismatch {
	if c == nil {
		return nil
	}
	p := c.Providers[provider]
	if p == nil || p.Aggregator || len(p.Families) == 0 {
		return nil
	}
	bare := name
	if i := strings.LastIndexByte(bare, '/'); i >= 0 {
		bare = bare[i+1:]
	}
	if p.owns(bare) {
		return nil
	}
	owner := c.Owner(bare)
	if owner == "" || owner == provider {
		return nil
	}
	return &Mismatch{Model: name, Provider: provider, Owner: owner, Suggestions: c.Suggest(provider, name)}
}

// Suggest returns up to five of provider's catalogued models closest to name.
func (c *Catalog) Suggest(provider, name string) []string {
	out := []string{}
	p := c.Providers[provider]
	if p == nil {
		return out
	}
	type scored struct {
		id string
		d  int
	}
	var list []scored
	for _, m := range p.Models {
		list = append(list, scored{m.ID, distance(normal(name), normal(m.ID))})
	}
	slices.SortStableFunc(list, func(a, b scored) int { return a.d - b.d })
	for i := 0; i < len(list) && i < 5; i++ {
		out = append(out, list[i].id)
	}
	return out
}

// Resolve returns name in the form provider expects: on an aggregator, a bare name another
// provider owns gets that vendor's prefix (claude-sonnet-4.6 → anthropic/claude-sonnet-4.6);
// elsewhere an alias becomes its model id (claude-sonnet-4 → claude-sonnet-4-0). Any other
// name is returned as given.
func (c *Catalog) Resolve(provider, name string) string {
	if c == nil {
		return name
	}
	p := c.Providers[provider]
	if p == nil {
		return name
	}
	if p.Aggregator {
		if !strings.Contains(name, "/") {
			if owner := c.Owner(name); owner != "" {
				return owner + "/" + name
			}
		}
		return name
	}
	if m, ok := p.find(name); ok && m.ID != name {
		return m.ID
	}
	return name
}

// Models lists provider's catalogued models in catalogue order.
func (c *Catalog) Models(provider string) []Model {
	if c == nil || c.Providers[provider] == nil {
		return nil
	}
	return slices.Clone(c.Providers[provider].Models)
}

// distance is the Levenshtein distance of a and b, with a shared prefix counting double
// so that models of the same family come first.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	common := 0
	for common < len(ra) && common < len(rb) && ra[common] == rb[common] {
		common++
	}
	return textdist.Levenshtein(a, b) - common
}
