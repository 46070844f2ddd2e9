//go:build !unix

package cli

import "os"

// lockDir does nothing where flock(2) is missing.
func lockDir(*os.File) error { return nil }

// unlocked is false where flock(2) is missing: a directory left by a
// killed command stays until removed by hand.
func unlocked(*os.File) bool { return false }
