// Package metricstest reads a /metrics answer the way a Prometheus server does (the text
// format parser of prometheus/common), for tests that check what moved.
package metricstest

import (
	"io"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Parse parses the text exposition format.
func Parse(t testing.TB, r io.Reader) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return fams
}

// Scrape GETs url (with a bearer key when key is set), checks the 200 and the text format's
// content type, and parses the body.
func Scrape(t testing.TB, url, key string) Families {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	if ct := res.Header.Get("Content-Type"); expfmt.ResponseFormat(res.Header).FormatType() != expfmt.TypeTextPlain {
		t.Fatalf("GET %s: content type %q", url, ct)
	}
	return Parse(t, res.Body)
}

// Has reports whether the family name has a series with exactly these label pairs (name,
// value, name, value, ...; other labels of the series must be absent).
func (f Families) Has(name string, labels ...string) bool {
	_, ok := f.find(name, labels)
	return ok
}

// Value is the series' value: a counter's or gauge's value, a histogram's sample count
// (Sum gives its sum). A missing series is 0, so a delta from before it existed works.
func (f Families) Value(name string, labels ...string) float64 {
	m, ok := f.find(name, labels)
	switch {
	case !ok:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Sum is a histogram series' sum of observations (0 when missing).
func (f Families) Sum(name string, labels ...string) float64 {
	if m, ok := f.find(name, labels); ok && m.Histogram != nil {
		return m.Histogram.GetSampleSum()
	}
	return 0
}

func (f Families) find(name string, labels []string) (*dto.Metric, bool) {
	fam, ok := f[name]
	if !ok {
		return nil, false
	}
	for _, m := range fam.Metric {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		match := true
		for _, lp := range m.Label {
			found := false
			for i := 0; i+1 < len(labels); i += 2 {
				if labels[i] == lp.GetName() && labels[i+1] == lp.GetValue() {
					found = true
				}
			}
			match = match && found
		}
		if match {
			return m, true
		}
	}
	return nil, false
}
