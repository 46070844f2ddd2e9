package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/version"
)

// versionTemplate prints what version.Line prints, for --version.
const versionTemplate = "{{.Name}} version {{.Version}}\n"

func newVersion(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print captf's version",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%w: version takes no arguments, got %q", runner.ErrBadInput, args)
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			_, err := io.WriteString(stdout, version.Line("captf"))
			return err
		},
	}
}
