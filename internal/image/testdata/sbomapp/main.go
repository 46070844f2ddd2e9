// Command sbomapp is a Go binary for the SBOM tests: it links a module of
// go.mod (go-cmp), whose version the SBOM must name.
package main

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
)

func main() {
	fmt.Print(cmp.Diff("a", "b"))
}
