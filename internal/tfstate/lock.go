package tfstate

import (
	"encoding/json"
	"fmt"
	"time"
)

// LockInfo is the JSON terraform and tofu write in the annotation
// AnnotationLockInfo of the Lease LeaseName(suffix) while they hold the
// lock; the Lease's spec.holderIdentity is then ID. Unlocking removes both.
type LockInfo struct {
	ID        string    // a UUID, also the holderIdentity
	Operation string    // e.g. OperationTypeApply, OperationTypePlan
	Info      string    // empty from the CLI
	Who       string    // user@hostname of the process holding the lock
	Version   string    // of terraform or tofu, e.g. 1.11.4
	Created   time.Time // UTC
	Path      string    // always empty for the kubernetes backend
}

// ParseLockInfo parses the lock annotation's value.
func ParseLockInfo(annotation string) (LockInfo, error) {
	var l LockInfo
	if err := json.Unmarshal([]byte(annotation), &l); err != nil {
		return LockInfo{}, fmt.Errorf("lock info: %w", err)
	}
	return l, nil
}
