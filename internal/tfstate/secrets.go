package tfstate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Backend constants: the workspace captf uses, the data key of a chunk,
// the backend's labels, and the lock annotation.
const (
	Workspace          = "default"
	DataKey            = "tfstate"
	LabelState         = "tfstate"             // "true" on every state Secret and the Lease
	LabelSuffix        = "tfstateSecretSuffix" // the secret_suffix
	LabelWorkspace     = "tfstateWorkspace"
	AnnotationLockInfo = "app.terraform.io/lock-info"
)

// ChunkSize is how many compressed bytes terraform stores per Secret; a
// state of more compressed bytes is split (see the package doc).
const ChunkSize = 1 << 20

var (
	// ErrNoState: no state Secret of the suffix (or no chunk at all).
	ErrNoState = errors.New("no state")
	// ErrMissingChunk: a chunk the others imply is not there.
	ErrMissingChunk = errors.New("missing chunk")
	// ErrDuplicateChunk: two Secrets or files claim the same chunk.
	ErrDuplicateChunk = errors.New("duplicated chunk")
	// ErrCorrupt: the chunks do not make a gzip'ed JSON state.
	ErrCorrupt = errors.New("corrupt state")
)

// Secret is what this package reads of a Kubernetes Secret.
type Secret struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	Data        map[string][]byte
}

// SecretName is the backend's Secret holding chunk 0 of the state of
// suffix: tfstate-default-<suffix>.
func SecretName(suffix string) string { return "tfstate-" + Workspace + "-" + suffix }

// PartName is the Secret holding chunk n: SecretName for 0,
// tfstate-default-<suffix>-part-<n> after.
func PartName(suffix string, n int) string {
	if n == 0 {
		return SecretName(suffix)
	}
	return SecretName(suffix) + "-part-" + strconv.Itoa(n)
}

// LeaseName is the Lease that locks the state of suffix.
func LeaseName(suffix string) string { return "lock-" + SecretName(suffix) }

// Selector are the labels every state Secret of suffix carries; list by
// them to find all of its chunks.
func Selector(suffix string) map[string]string {
	return map[string]string{LabelState: "true", LabelSuffix: suffix, LabelWorkspace: Workspace}
}

// Chunks returns the compressed chunks of the state of suffix, in order and
// exactly as stored, from its Secrets. Secrets of other names are ignored,
// so secrets may be any list that holds them all. The order comes from the
// names only, as terraform reads it: chunk 0 is SecretName(suffix), chunk
// n its -part-<n>. No Secret at all is ErrNoState; a gap, a part without
// chunk 0 or a Secret without the data key is ErrMissingChunk; two Secrets
// for one chunk are ErrDuplicateChunk. The errors name Secrets, never data.
func Chunks(suffix string, secrets []Secret) ([][]byte, error) {
	byIndex := map[int]*Secret{}
	last := -1
	for i := range secrets {
		n, ok := chunkIndex(suffix, secrets[i].Name)
		if !ok {
			continue
		}
		if prev, dup := byIndex[n]; dup {
			return nil, fmt.Errorf("%w: Secrets %s and %s both hold chunk %d", ErrDuplicateChunk, prev.Name, secrets[i].Name, n)
		}
		byIndex[n] = &secrets[i]
		last = max(last, n)
	}
	if last < 0 {
		return nil, fmt.Errorf("%w: no Secret %s", ErrNoState, SecretName(suffix))
	}
	chunks := make([][]byte, last+1)
	for n := range chunks {
		s, ok := byIndex[n]
		if !ok {
			return nil, fmt.Errorf("%w: chunk %d (Secret %s) is missing, chunk %d is there", ErrMissingChunk, n, PartName(suffix, n), last)
		}
		data, ok := s.Data[DataKey]
		if !ok {
			return nil, fmt.Errorf("%w: Secret %s has no data key %q", ErrMissingChunk, s.Name, DataKey)
		}
		chunks[n] = data
	}
	return chunks, nil
}

// chunkIndex is the chunk a Secret of that name holds, if it is one of
// suffix's: a -part- number as terraform parses it (decimal, 1 or more).
func chunkIndex(suffix, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, SecretName(suffix))
	switch {
	case !ok:
		return 0, false
	case rest == "":
		return 0, true
	}
	digits, ok := strings.CutPrefix(rest, "-part-")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 {
		return 0, false
	}
	return n, true
}
