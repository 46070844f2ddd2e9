//go:build !unix

package inputfile

import "os"

func open(path string) (*os.File, error) { return os.Open(path) }
