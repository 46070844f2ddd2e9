// Package planlog writes and reads the closing section of a plan Job's
// log: which top-level attributes each resource change changes, by name,
// never a value.
//
//	captf: attributes that change, by name:
//	captf: module.main.terraform_data.worker[0] (update): input, output
//
// The runner writes it after terraform's output of the plan; the review
// page reads it from the log's tail.
package planlog

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/captf/captf/pkg/fingerprint"
)

// Header starts the section.
const Header = "captf: attributes that change, by name:"

// Write writes the section for changed, if there is any change.
func Write(w io.Writer, changed []fingerprint.Attributes) error {
	if len(changed) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("\n" + Header + "\n")
	for _, c := range changed {
		fmt.Fprintf(&b, "captf: %s (%s): %s\n", c.Address, c.Action, strings.Join(c.Names, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// entry is a line of the section. Names hold no parenthesis and the
// address part is greedy, so the action is the line's last " (action): ",
// whatever an address's key holds.
var entry = regexp.MustCompile(`^captf: (.+) \((create|update|replace)\): ([A-Za-z0-9_-]+(?:, [A-Za-z0-9_-]+)*)$`)

// Read reads the last section in r: the lines that follow its last
// Header. A log without one has none.
func Read(r io.Reader) ([]fingerprint.Attributes, error) {
	var out []fingerprint.Attributes
	s := bufio.NewScanner(r)
	s.Buffer(nil, 1<<20)
	in := false
	for s.Scan() {
		line := strings.TrimRight(s.Text(), "\r")
		if line == Header {
			in, out = true, nil
			continue
		}
		if !in {
			continue
		}
		m := entry.FindStringSubmatch(line)
		if m == nil {
			in = false
			continue
		}
		out = append(out, fingerprint.Attributes{Address: m[1], Action: m[2], Names: strings.Split(m[3], ", ")})
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read the changed attributes: %w", err)
	}
	return out, nil
}
