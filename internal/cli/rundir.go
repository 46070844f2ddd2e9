package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/captf/captf/internal/runner"
)

// TmpDir is the folder of ROOT/.captf that holds the private directory of
// each running captf command.
const TmpDir = "tmp"

// runDir is the private directory (mode 0700) of one captf command, in
// ROOT/.captf/tmp: what must not outlive the command goes there, the saved
// plan file above all, which holds values in clear text. Close removes it.
//
// A command killed with SIGKILL cannot remove it, so the command holds a
// lock on its directory while it lives; the operating system drops the
// lock when the process ends, however it ends. Every command sweeps
// ROOT/.captf/tmp first and removes each directory whose lock it can take:
// the leftovers of a command that died.
type runDir struct {
	path string
	lock *os.File
}

func openRunDir(root string) (*runDir, error) {
	if err := runner.EnsureStateDir(root); err != nil {
		return nil, err
	}
	base := filepath.Join(root, runner.StateDir, TmpDir)
	if err := os.Mkdir(base, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("private directory: %w", err)
	}
	if info, err := os.Lstat(base); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory of captf's own (remove it)", runner.ErrBadInput, base)
	}
	sweep(base)
	// Another command's sweep may take a new directory between its
	// creation and its lock: then it is gone, and another is made.
	var err error
	for range 3 {
		var path string
		if path, err = os.MkdirTemp(base, "run-*"); err != nil {
			break
		}
		var lock *os.File
		if lock, err = os.Open(path); err != nil {
			continue
		}
		if err = lockDir(lock); err != nil {
			lock.Close()
			break
		}
		if _, err = os.Stat(path); err != nil {
			lock.Close()
			continue
		}
		return &runDir{path: path, lock: lock}, nil
	}
	return nil, fmt.Errorf("private directory: %w", err)
}

// Close removes the directory and then drops its lock.
func (d *runDir) Close() {
	os.RemoveAll(d.path)
	d.lock.Close()
}

// sweep removes the directories in base whose command is gone: those whose
// lock it can take. It holds the lock while it removes one, so a command
// that raced it to a new directory sees the directory gone and makes
// another.
func sweep(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(base, e.Name())
		if !e.IsDir() {
			os.Remove(path)
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if unlocked(f) {
			os.RemoveAll(path)
		}
		f.Close()
	}
}
