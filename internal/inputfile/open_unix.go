//go:build unix

package inputfile

import (
	"os"
	"syscall"
)

// open opens path without blocking: opening a named pipe for reading
// otherwise waits for a writer, where no context reaches.
func open(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
