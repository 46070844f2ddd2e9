package inputfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name  string
		ctx   context.Context
		path  string
		limit int64
		want  error
	}{
		{"at the limit", context.Background(), small, 10, nil},
		{"over the limit", context.Background(), small, 9, ErrTooLarge},
		{"a named pipe nobody writes", context.Background(), fifo, 10, ErrNotRegular},
		{"a device", context.Background(), "/dev/zero", 10, ErrNotRegular},
		{"a directory", context.Background(), dir, 10, ErrNotRegular},
		{"cancelled", cancelled, small, 10, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := Read(c.ctx, c.path, c.limit)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			if err == nil && string(b) != "0123456789" {
				t.Errorf("read %q", b)
			}
		})
	}
}
