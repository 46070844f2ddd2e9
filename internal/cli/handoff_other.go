//go:build !unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// handOff runs the preview binary on this terminal and exits with its
// exit code (where a process cannot replace itself).
func handOff(path string, args, env []string) error {
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = os.Stdin, os.Stdout, os.Stderr, env
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		return fmt.Errorf("run %s: %w", path, err)
	}
	os.Exit(0)
	return nil
}
