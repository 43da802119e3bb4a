package gateway_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// lazyConn starts ServeLazy over pipes with open and returns the client and the serve result.
func lazyConn(t *testing.T, open func(epoch string) (*gateway.Server, error)) (*gwclient.Client, <-chan error) {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- gateway.ServeLazy(context.Background(), jsonrpc.NewLineFramer(sr, sw, closers{sr, sw}, 0), nil, open)
		sw.Close()
	}()
	c := gwclient.New(jsonrpc.NewLineFramer(cr, cw, closers{cr, cw}, 64<<20))
	t.Cleanup(func() {
		c.Close()
		<-c.Done()
	})
	return c, done
}

// gateway.ready is written before the server (its store and engine) exists; a request sent
// meanwhile waits and is answered once it does, and the epoch announced is the server's.
func TestGatewayReadyBeforeStore(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, enginetest.Options{})
	release := make(chan struct{})
	var gw *gateway.Server
	c, done := lazyConn(t, func(epoch string) (*gateway.Server, error) {
		<-release // the store is still opening
		gw = gateway.New(h.Engine, gateway.Options{Version: "test", Epoch: epoch})
		return gw, nil
	})
	ready, _, err := c.WaitType(tctx(t), 0, "", "gateway.ready")
	if err != nil {
		t.Fatal(err)
	}
	epoch, _ := payload(t, ready)["replay_epoch"].(string)
	if len(epoch) != 16 || !hex8.MatchString(epoch[:8]) || !hex8.MatchString(epoch[8:]) {
		t.Fatalf("ready: %v", payload(t, ready))
	}
	answered := make(chan map[string]any, 1)
	go func() {
		var out map[string]any
		_ = c.CallInto(tctx(t), "ping", nil, &out)
		answered <- out
	}()
	select {
	case r := <-answered:
		t.Fatalf("answered before the server was built: %v", r)
	default:
	}
	close(release)
	if r := <-answered; r["pong"] != true {
		t.Fatalf("ping: %v", r)
	}
	if gw.Epoch() != epoch {
		t.Fatalf("server epoch %q, announced %q", gw.Epoch(), epoch)
	}
	t.Cleanup(gw.Close)
	c.Close()
	<-done
}

// A server that cannot be built is reported after the ready frame as an error event, and
// ServeLazy returns the error.
func TestGatewayReadyThenStartFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("store locked by another process")
	c, done := lazyConn(t, func(string) (*gateway.Server, error) { return nil, boom })
	if _, _, err := c.WaitType(tctx(t), 0, "", "gateway.ready"); err != nil {
		t.Fatal(err)
	}
	e, _, err := c.WaitType(tctx(t), 0, "", "error")
	if err != nil {
		t.Fatal(err)
	}
	if m := payload(t, e)["message"]; m != "hermes could not start: store locked by another process" {
		t.Fatalf("error event: %v", m)
	}
	if err := <-done; !errors.Is(err, boom) {
		t.Fatalf("ServeLazy: %v", err)
	}
}
