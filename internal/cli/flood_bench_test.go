package cli

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkInFlightFloodRSS pipelines 200,000 async JSON-RPC requests into a real `hermes
// gateway` and `hermes acp` process, reading answers as they come, and reports the child's
// peak RSS (VmHWM) and how many requests were refused with the overload error (-32001).
// HERMES_FLOOD_BIN runs another hermes binary instead (e.g. a build from before the cap).
// Linux only (reads /proc). Run with -benchtime 1x.
func BenchmarkInFlightFloodRSS(b *testing.B) {
	n := 200000
	if v, err := strconv.Atoi(os.Getenv("HERMES_FLOOD_N")); err == nil && v > 0 {
		n = v
	}
	for _, surface := range []struct{ name, init, req string }{
		{"gateway", "", `{"jsonrpc":"2.0","id":%d,"method":"session.list","params":{}}`},
		{"acp", `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}`, `{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}}`},
	} {
		for _, slow := range []bool{false, true} {
			name := surface.name
			if slow {
				name += "/slow-reader"
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					peak, refused, answered := flood(b, surface.name, surface.init, surface.req, n, slow)
					b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
					b.ReportMetric(float64(refused), "refused")
					b.ReportMetric(float64(answered), "answered")
				}
			})
		}
	}
}

// With slow set the client starts reading answers only once it has written everything, or
// after 3 s when the server has stopped reading it (the cap's back-pressure).
func flood(b *testing.B, surface, init, reqFmt string, n int, slow bool) (peakKiB int, refused, answered int64) {
	home, work := b.TempDir(), b.TempDir()
	bin, env := os.Args[0], []string{"HERMES_TEST_AS_MAIN=1"}
	if alt := os.Getenv("HERMES_FLOOD_BIN"); alt != "" {
		bin, env = alt, nil
	}
	cmd := exec.Command(bin, surface)
	cmd.Dir = work
	cmd.Env = append(append(os.Environ(), env...), "HERMES_HOME="+home, "HERMES_MODEL=replay:none")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	want := int64(n)
	if init != "" {
		want++
	}
	done, all := make(chan struct{}), make(chan struct{})
	var refusedN, answeredN atomic.Int64
	written := make(chan struct{})
	go func() {
		defer close(done)
		if slow {
			select {
			case <-written:
			case <-time.After(3 * time.Second):
			}
		}
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			if bytes.Contains(line, []byte(`"code":-32001`)) {
				refusedN.Add(1)
			}
			if bytes.Contains(line, []byte(`"id":`)) && !bytes.Contains(line, []byte(`"method"`)) {
				if answeredN.Add(1) == want {
					close(all)
				}
			}
		}
	}()
	w := bufio.NewWriterSize(stdin, 1<<20)
	if init != "" {
		w.WriteString(init + "\n")
	}
	for i := range n {
		w.WriteString(strings.Replace(reqFmt, "%d", strconv.Itoa(i), 1) + "\n")
	}
	w.Flush()
	close(written)
	// VmHWM is the peak over the process's life: read it once every answer is in.
	select {
	case <-all:
	case <-done:
	}
	peakKiB = vmHWM(cmd.Process.Pid)
	stdin.Close()
	<-done
	cmd.Wait()
	return peakKiB, refusedN.Load(), answeredN.Load()
}

func vmHWM(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kib
		}
	}
	return 0
}
