package httpapi_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkRunLifecycle admits runs over a zero-latency model and follows each to its terminal
// event, from parallel clients. Every run writes its record three times (queued, running,
// settled), each a synced store write; it reports runs/s and the p50/p99 latency of the
// admission (the 202) and of the whole run.
func BenchmarkRunLifecycle(b *testing.B) {
	tg := newTargetWith(b, instant{}, nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var mu sync.Mutex
	var admit, whole []time.Duration
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var a, w []time.Duration
		for pb.Next() {
			t0 := time.Now()
			req, _ := http.NewRequest("POST", tg.base+"/v1/runs", strings.NewReader(`{"input":"go"}`))
			req.Header.Set("Authorization", "Bearer "+testKey)
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			var adm struct {
				RunID string `json:"run_id"`
			}
			err = json.NewDecoder(res.Body).Decode(&adm)
			res.Body.Close()
			if err != nil || res.StatusCode != 202 {
				b.Errorf("admission %d %v", res.StatusCode, err)
				return
			}
			a = append(a, time.Since(t0))
			req, _ = http.NewRequest("GET", tg.base+"/v1/runs/"+adm.RunID+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+testKey)
			res, err = client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			done := false
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				if strings.Contains(sc.Text(), `"event":"run.completed"`) {
					done = true
				}
			}
			res.Body.Close()
			if !done {
				b.Errorf("run %s did not complete", adm.RunID)
				return
			}
			w = append(w, time.Since(t0))
		}
		mu.Lock()
		admit, whole = append(admit, a...), append(whole, w...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(whole) == 0 {
		return
	}
	slices.Sort(admit)
	slices.Sort(whole)
	b.ReportMetric(float64(len(whole))/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(admit[len(admit)/2].Microseconds()), "admit-p50-µs")
	b.ReportMetric(float64(admit[len(admit)*99/100].Microseconds()), "admit-p99-µs")
	b.ReportMetric(float64(whole[len(whole)/2].Microseconds()), "run-p50-µs")
	b.ReportMetric(float64(whole[len(whole)*99/100].Microseconds()), "run-p99-µs")
}
