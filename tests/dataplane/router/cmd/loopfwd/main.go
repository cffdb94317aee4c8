// Copyright: inference.blueprints contributors
// GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

// Command loopfwd gives data-plane endpoints the addresses the router sees: it listens on
// loopback addresses (127.0.0.x:8000, one per endpoint, as pods share one InferencePool target
// port) and forwards each connection to the local port of the program behind it (an
// llm-d-inference-sim or the P/D sidecar), which listens on a port of its own because neither
// has a bind-address flag. Usage: loopfwd LISTEN=TARGET [LISTEN=TARGET ...]; it prints
// "ready" once every listener is bound and runs until killed.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
)

func pipe(client net.Conn, target string) {
	defer client.Close()
	upstream, err := net.Dial("tcp", target)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loopfwd: %s -> %s: %v\n", client.LocalAddr(), target, err)
		return
	}
	defer upstream.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	copyHalf := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}
	go copyHalf(upstream, client)
	go copyHalf(client, upstream)
	wg.Wait()
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loopfwd LISTEN=TARGET [LISTEN=TARGET ...]")
		os.Exit(2)
	}
	var listeners []net.Listener
	for _, arg := range os.Args[1:] {
		listen, target, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "loopfwd: %q is not LISTEN=TARGET\n", arg)
			os.Exit(2)
		}
		host, _, err := net.SplitHostPort(listen)
		if err != nil || !net.ParseIP(host).IsLoopback() {
			fmt.Fprintf(os.Stderr, "loopfwd: %q is not a loopback address:port\n", listen)
			os.Exit(2)
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			fmt.Fprintf(os.Stderr, "loopfwd: %v\n", err)
			os.Exit(1)
		}
		listeners = append(listeners, ln)
		go func(ln net.Listener, target string) {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go pipe(conn, target)
			}
		}(ln, target)
	}
	fmt.Println("ready")
	select {}
}
