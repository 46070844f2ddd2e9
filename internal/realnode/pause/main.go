// Command pause is the real node's sandbox image: it holds a pod's
// namespaces until it is told to stop, as registry.k8s.io/pause does,
// which the node cannot reach.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
