//go:build unix

package cli

import (
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on the open directory f; it lasts until
// f is closed or the process ends.
func lockDir(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
}

// unlocked reports whether no process holds a lock on the open directory
// f; when it does not, the lock is now f's.
func unlocked(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
