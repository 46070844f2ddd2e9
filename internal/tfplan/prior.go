package tfplan

import (
	"archive/zip"
	"fmt"
	"slices"

	"github.com/captf/captf/internal/tfstate"
)

// PriorState returns the serial and the lineage of the state a saved plan
// file was made from: its tfstate member, which terraform and tofu write
// with the backend state's lineage and serial (an empty lineage when the
// backend held no state), and check again when the plan is applied ("Saved
// plan is stale"). No value of the state is decoded.
func PriorState(path string) (tfstate.Meta, error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return tfstate.Meta{}, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	defer z.Close()
	i := slices.IndexFunc(z.File, func(f *zip.File) bool { return f.Name == "tfstate" })
	if i < 0 {
		return tfstate.Meta{}, fmt.Errorf("%w: no tfstate in the plan file", ErrUnsupported)
	}
	rc, err := z.File[i].Open()
	if err != nil {
		return tfstate.Meta{}, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	defer rc.Close()
	m, err := tfstate.ReadMeta(rc)
	if err != nil {
		return tfstate.Meta{}, fmt.Errorf("the plan file's prior state: %w", err)
	}
	return m, nil
}
