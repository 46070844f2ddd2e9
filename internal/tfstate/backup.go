package tfstate

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A backup holds the chunks of a state exactly as the backend stored them,
// chunk n under the data key ChunkKey(n) (the manager spreads them over one
// Secret per chunk, since terraform splits a state only when it no longer
// fits one Secret), and the chunks' Digests under the annotation
// AnnotationDigests. A restore Job gets them as the files <dir>/chunk-<n>
// (ReadChunkDir) and can be given the digests to check (VerifyDigests).

// AnnotationDigests on a backup holds Digests of its chunks.
const AnnotationDigests = "captf.io/state-chunk-sha256"

// ChunkKey is the data key (and the restore Job's file name) of chunk n.
func ChunkKey(n int) string { return "chunk-" + strconv.Itoa(n) }

// ReadChunkDir reads the chunks of a backup from the files chunk-<n> of
// dir (a mounted backup Secret: its ..data entries are ignored). A gap is
// ErrMissingChunk and no chunk file at all ErrNoState, named by file; a name like
// chunk-01 is refused rather than guessed.
func ReadChunkDir(dir string) ([][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: backup folder: %w", ErrNoState, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return collect(names, func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return b, nil
	})
}

// collect orders the chunk-<n> names of names and reads each.
func collect(names []string, read func(name string) ([]byte, error)) ([][]byte, error) {
	byIndex := map[int]string{}
	last := -1
	for _, name := range names {
		digits, ok := strings.CutPrefix(name, "chunk-")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n < 0 || ChunkKey(n) != name {
			return nil, fmt.Errorf("%w: %q is not a chunk name", ErrCorrupt, name)
		}
		byIndex[n] = name
		last = max(last, n)
	}
	if last < 0 {
		return nil, fmt.Errorf("%w: no %s", ErrNoState, ChunkKey(0))
	}
	chunks := make([][]byte, last+1)
	for n := range chunks {
		name, ok := byIndex[n]
		if !ok {
			return nil, fmt.Errorf("%w: %s is missing, %s is there", ErrMissingChunk, ChunkKey(n), ChunkKey(last))
		}
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		chunks[n] = b
	}
	return chunks, nil
}
