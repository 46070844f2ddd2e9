// Package inputfile reads the files captf's commands take as input: regular
// files only, up to a size limit, and no longer than the command runs.
//
// A named pipe or a device (a link to /dev/zero, say) is refused before it
// is read: a pipe nobody writes would hold the command forever, and a
// device may never end. A regular file is read in chunks, and the read
// stops as soon as the context ends, so Ctrl-C stops a command reading a
// large file.
package inputfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

var (
	// ErrNotRegular: the path names a named pipe, a device, a socket or a
	// directory, not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file holds more bytes than the limit.
	ErrTooLarge = errors.New("file too large")
)

// chunk is how much one read takes before the context is checked again.
const chunk = 1 << 20

// Open opens the regular file at path for reading, following a symbolic
// link, and refuses anything else (ErrNotRegular). Opening a named pipe
// does not wait for a writer.
func Open(path string) (*os.File, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is %s: %w", path, Kind(info), ErrNotRegular)
	}
	return f, nil
}

// Read reads the regular file at path, of at most limit bytes. It refuses
// a file that is not regular (ErrNotRegular) or larger than limit
// (ErrTooLarge) before reading it whole, and returns context.Cause(ctx)
// once ctx ends.
func Read(ctx context.Context, path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := fmt.Errorf("%s holds more than %s: %w", path, Size(limit), ErrTooLarge)
	if info, err := f.Stat(); err == nil && info.Size() > limit {
		return nil, tooLarge
	}
	b, err := io.ReadAll(io.LimitReader(NewReader(ctx, f), limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge
	}
	return b, nil
}

// NewReader returns a reader of r whose reads, of at most a chunk each,
// fail with context.Cause(ctx) once ctx ends.
func NewReader(ctx context.Context, r io.Reader) io.Reader {
	return &reader{ctx: ctx, r: r}
}

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (r *reader) Read(p []byte) (int, error) {
	if r.ctx.Err() != nil {
		return 0, context.Cause(r.ctx)
	}
	if len(p) > chunk {
		p = p[:chunk]
	}
	return r.r.Read(p)
}

// Kind names what a file that is not a regular one is, for a message.
func Kind(info fs.FileInfo) string {
	switch m := info.Mode(); {
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// Size renders a limit in bytes for a message: "4 MiB", "512 KiB".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
