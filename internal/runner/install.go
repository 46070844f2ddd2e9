package runner

import (
	"fmt"
	"io"
	"os"
)

// Install copies the binary at src to dest with mode 0755. It is how a
// runner Job's init container puts captf-runner into the volume the module
// image's container runs it from: the runner image is scratch, with no cp.
func Install(src, dest string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("install: %w", cerr)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	// The umask may have taken bits from the mode OpenFile was given, and
	// an existing file keeps its own.
	if err := out.Chmod(0o755); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}
