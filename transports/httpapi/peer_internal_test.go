package httpapi

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestPeerClosed: the look at a connection sees its client's close, and takes nothing away:
// bytes the client sent (a pipelined request) are still there to read, and while they wait the
// connection counts as open.
func TestPeerClosed(t *testing.T) {
	if !canPeek {
		t.Skip("no peek at sockets on this platform")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	closed := peerClosedFunc(&limitConn{Conn: server})
	if closed == nil {
		t.Fatal("no check for a TCP connection")
	}
	if closed() {
		t.Fatal("an open connection seen as closed")
	}
	if _, err := client.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	// Until the server reads what was sent, the close behind it is not seen.
	deadline := time.Now().Add(30 * time.Second)
	buf := make([]byte, 64)
	if err := server.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	if n, err := server.Read(buf[:1]); err != nil || n != 1 || buf[0] != 'G' {
		t.Fatalf("first byte %q %v", buf[:n], err)
	}
	if closed() {
		t.Fatal("a connection with bytes to read seen as closed")
	}
	if n, err := io.ReadFull(server, buf[:17]); err != nil || string(buf[:n]) != "ET / HTTP/1.1\r\n\r\n" {
		t.Fatalf("the rest %q %v", buf[:n], err)
	}
	for !closed() {
		if time.Now().After(deadline) {
			t.Fatal("the client's close was not seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A deadline that passed does not hide the close (the request's header timeout has
	// usually passed by the time a stream asks).
	if err := server.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if !closed() {
		t.Fatal("the close not seen after the read deadline passed")
	}
}
