package tfstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A backup of the state of one suffix at one serial is the Secret
// BackupName(suffix, serial). Its data holds the chunks exactly as the
// backend stored them, under ChunkKey(n); its annotations say, without a
// value, what they make: serial, lineage, compressed size, chunk count
// and each chunk's sha256. A restore Job gets the data as the files
// <dir>/chunk-<n> (ReadChunkDir) and can be given the digests to check.
//
// A Secret holds at most MaxSecretData bytes of data, and terraform splits
// a state only when it is larger than that: a chunked state can never fit
// one backup Secret (CheckSecretSize says so). Because the keys are
// chunk-<n> whatever Secret holds them, a layout of one backup Secret per
// chunk would still give a restore Job one folder of chunk-<n> files (a
// projected volume of all of them); see the restore report.
const (
	BackupPrefix = "captf-state-backup-"
	// LabelBackupOf is the suffix whose state a backup Secret holds.
	LabelBackupOf         = "captf.io/state-backup-of"
	AnnotationStateSerial = "captf.io/state-serial"
	AnnotationLineage     = "captf.io/state-lineage"
	AnnotationStateBytes  = "captf.io/state-bytes"        // compressed, all chunks
	AnnotationDigests     = "captf.io/state-chunk-sha256" // Digests of the chunks
	AnnotationStateChunks = "captf.io/state-chunks"
)

// MaxSecretData is the most data bytes the API server takes in one Secret
// (the values; the keys are not counted).
const MaxSecretData = 1 << 20

// ErrTooLarge: the data does not fit one Secret.
var ErrTooLarge = errors.New("too large for one Secret")

// Backup is a backup Secret to create: its name, labels, annotations and
// data, and the state it holds.
type Backup struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	Data        map[string][]byte
	Meta        Meta
	// Chunks are the stored chunks, the same slices as Data's values.
	Chunks [][]byte
}

// BackupName names the backup of suffix's state at serial.
func BackupName(suffix string, serial int64) string {
	return BackupPrefix + suffix + "-" + strconv.FormatInt(serial, 10)
}

// ChunkKey is the data key (and the restore Job's file name) of chunk n.
func ChunkKey(n int) string { return "chunk-" + strconv.Itoa(n) }

// NewBackup makes the backup of the state of suffix from its Secrets (see
// Chunks). The state is checked whole (Check) first: a corrupt state is
// not backed up. It does not check the size: see CheckSecretSize.
func NewBackup(suffix string, secrets []Secret) (*Backup, error) {
	chunks, err := Chunks(suffix, secrets)
	if err != nil {
		return nil, err
	}
	meta, err := Check(chunks)
	if err != nil {
		return nil, err
	}
	b := &Backup{
		Name:   BackupName(suffix, meta.Serial),
		Labels: map[string]string{LabelBackupOf: suffix},
		Annotations: map[string]string{
			AnnotationStateSerial: strconv.FormatInt(meta.Serial, 10),
			AnnotationLineage:     meta.Lineage,
			AnnotationStateBytes:  strconv.FormatInt(Size(chunks), 10),
			AnnotationDigests:     Digests(chunks),
			AnnotationStateChunks: strconv.Itoa(len(chunks)),
		},
		Data:   make(map[string][]byte, len(chunks)),
		Meta:   meta,
		Chunks: chunks,
	}
	for n, c := range chunks {
		b.Data[ChunkKey(n)] = c
	}
	return b, nil
}

// CheckSecretSize returns an error wrapping ErrTooLarge when data holds
// more than MaxSecretData bytes, which the API server would refuse. A
// backup of a state terraform chunked always does.
func CheckSecretSize(data map[string][]byte) error {
	var n int
	for _, v := range data {
		n += len(v)
	}
	if n > MaxSecretData {
		return fmt.Errorf("%w: %d bytes of data, at most %d fit", ErrTooLarge, n, MaxSecretData)
	}
	return nil
}

// BackupChunks returns the chunks of a backup Secret's data, in order.
// Keys other than chunk-<n> are ignored; a gap is ErrMissingChunk.
func BackupChunks(data map[string][]byte) ([][]byte, error) {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	return collect(keys, func(key string) ([]byte, error) { return data[key], nil })
}

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
