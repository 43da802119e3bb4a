package tool_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

type named string

func (n named) Spec() model.ToolSpec { return model.ToolSpec{Name: string(n)} }
func (n named) Call(context.Context, tool.Call, *tool.Env) (tool.Result, error) {
	return tool.Result{Content: string(n)}, nil
}

// TestRegistryConcurrentChange: tools are added and removed while turns look them up and
// list them (an MCP reload during turns); under -race nothing may conflict, and a listing is
// always a consistent set (every listed name resolves in the same snapshot).
func TestRegistryConcurrentChange(t *testing.T) {
	r := tool.NewRegistry(named("read_file"))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("srv%d__t%d", w, i%5)
				r.Add(named(name))
				r.Remove(name)
			}
		})
	}
	for range 2000 {
		specs := r.Specs()
		if len(specs) == 0 || specs[0].Name != "read_file" {
			t.Fatalf("specs %v", specs)
		}
		if _, err := r.Get("read_file"); err != nil {
			t.Fatal(err)
		}
		c := r.Clone()
		if len(c.Names()) != len(c.Specs()) {
			t.Fatal("clone inconsistent")
		}
	}
	close(stop)
	wg.Wait()
	if n := r.Names(); len(n) != 1 {
		t.Fatalf("left over: %v", n)
	}
}
