package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/pkg/fingerprint"
)

func TestRootKey(t *testing.T) {
	dir := t.TempDir()
	// Concurrent first uses agree on one key.
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := RootKey(context.Background(), dir, nil)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !bytes.Equal(k, keys[0]) || len(k) != fingerprint.MinKeySize {
			t.Fatalf("keys differ or are short: %x %x", k, keys[0])
		}
	}
	path := filepath.Join(dir, StateDir, KeyFile)
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", info, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, StateDir)); len(entries) != 2 {
		t.Errorf("state dir holds %d entries, want the key and .gitignore", len(entries))
	}
	// A key that was cut short is refused, never replaced.
	if err := os.WriteFile(path, keys[0][:16], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RootKey(context.Background(), dir, nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("short root key: err = %v, want ErrBadInput", err)
	}
	if b, _ := os.ReadFile(path); len(b) != 16 {
		t.Error("a short key was replaced")
	}
}

func TestCheckHash(t *testing.T) {
	good := fingerprint.EmptyPlanHash
	for h, ok := range map[string]bool{
		"":                      true,
		good:                    true,
		"p1:" + good[3:]:        true,
		"p2:" + good[4:]:        false,
		"P2:" + good[3:]:        false,
		good + "0":              false,
		"sha256:" + good[3:]:    false,
		"p2:" + good[3:] + "\n": false,
	} {
		if err := CheckHash(h); (err == nil) != ok {
			t.Errorf("CheckHash(%q) = %v, want ok %v", h, err, ok)
		}
	}
}

func TestExitCode(t *testing.T) {
	cases := map[error]int{
		nil:                                 ExitOK,
		errors.New("boom"):                  ExitFailure,
		fmt.Errorf("x: %w", ErrPlanChanged): ExitPlanChanged,
		tfexec.ErrStalePlan:                 ExitPlanChanged,
		fmt.Errorf("x: %w", ErrBadInput):    ExitBadInput,
		fingerprint.ErrShortKey:             ExitBadInput,
		fingerprint.ErrNoKey:                ExitBadInput,
		fmt.Errorf("show: %w", fingerprint.ErrMalformedPlan): ExitBadInput,
	}
	for err, want := range cases {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
