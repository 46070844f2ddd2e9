package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Gate forwards TCP connections from a listening address to a target,
// bytes unchanged (TLS passes through), until it is closed: a closed gate
// accepts each connection and closes it at once, so whoever dials it —
// the API server calling a webhook — fails as if the server were down,
// while the server behind it keeps running.
type Gate struct {
	// Addr is where the gate listens.
	Addr string

	target string
	l      net.Listener
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// StartGate listens on addr (host:port, e.g. where the API server's
// webhook configuration points) and forwards to target; it stops when the
// test ends.
func StartGate(t testing.TB, addr, target string) *Gate {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{Addr: l.Addr().String(), target: target, l: l, conns: map[net.Conn]bool{}}
	g.wg.Add(1)
	go g.serve()
	t.Cleanup(func() {
		_ = l.Close()
		g.Shut()
		g.wg.Wait()
	})
	return g
}

// Shut makes the target unreachable: new connections are closed at once
// and the open ones are cut.
func (g *Gate) Shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for c := range g.conns {
		_ = c.Close()
	}
}

// Open forwards new connections again.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = false
}

func (g *Gate) serve() {
	defer g.wg.Done()
	for {
		c, err := g.l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		g.mu.Lock()
		closed := g.closed
		if !closed {
			g.conns[c] = true
		}
		g.mu.Unlock()
		if closed {
			_ = c.Close()
			continue
		}
		g.wg.Add(1)
		go g.forward(c)
	}
}

func (g *Gate) forward(c net.Conn) {
	defer g.wg.Done()
	defer func() {
		g.mu.Lock()
		delete(g.conns, c)
		g.mu.Unlock()
		_ = c.Close()
	}()
	up, err := net.Dial("tcp", g.target)
	if err != nil {
		return
	}
	g.mu.Lock()
	g.conns[up] = true
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.conns, up)
		g.mu.Unlock()
		_ = up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	// Either side ending ends both.
	<-done
}
