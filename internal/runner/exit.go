package runner

import (
	"errors"
	"fmt"

	"github.com/captf/captf/internal/inputfile"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/pkg/fingerprint"
)

// Exit codes of the captf CLI and of the runner, the same everywhere.
const (
	// ExitOK: the plan was made, or applied, or there was nothing to apply.
	ExitOK = 0
	// ExitFailure: terraform or captf failed for any other reason.
	ExitFailure = 1
	// ExitBadInput: bad usage or bad input, such as a missing or short plan
	// key, a malformed plan document or a malformed --expect-plan value.
	ExitBadInput = 2
	// ExitPlanChanged: the fresh plan does not hash to the approved value
	// (or nothing was approved); nothing was applied.
	ExitPlanChanged = 3
)

var (
	// ErrBadInput marks errors that exit with ExitBadInput.
	ErrBadInput = errors.New("bad input")
	// ErrPlanChanged marks a refused apply; it exits with ExitPlanChanged.
	ErrPlanChanged = errors.New("the plan moved")
	// ErrRuntimeChanged marks an apply refused because what it runs
	// outside the plan (provisioners, provider configurations) moved since
	// the plan was approved. It is a changed plan: ExitPlanChanged.
	ErrRuntimeChanged = fmt.Errorf("%w: what runs at apply moved", ErrPlanChanged)
)

// ExitCode maps an error to the documented exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrPlanChanged), errors.Is(err, tfexec.ErrStalePlan), errors.Is(err, ErrDestructive), errors.Is(err, ErrNeedsApproval):
		return ExitPlanChanged
	case errors.Is(err, ErrBadInput),
		errors.Is(err, tfexec.ErrInvalidInput),
		errors.Is(err, fingerprint.ErrNoKey),
		errors.Is(err, fingerprint.ErrShortKey),
		errors.Is(err, fingerprint.ErrMalformedPlan),
		errors.Is(err, inputfile.ErrNotRegular),
		errors.Is(err, inputfile.ErrTooLarge):
		return ExitBadInput
	}
	return ExitFailure
}
