//go:build unix

package cli

import (
	"fmt"
	"syscall"
)

// handOff replaces this process with the preview binary, so that its exit
// code, its signals and its terminal are the user's own.
func handOff(path string, args, env []string) error {
	err := syscall.Exec(path, append([]string{path}, args...), env)
	return fmt.Errorf("run %s: %w", path, err)
}
