package changeset

import "fmt"

// DigestPrefix versions the change-set digest: it changes with anything
// that changes what the digest covers.
const DigestPrefix = "cs1:"

// digestMember is what the digest covers of a member. Error is left out:
// its text may vary from run to run, and a failed member applies nothing.
type digestMember struct {
	Name          string   `json:"name"`
	Component     string   `json:"component"`
	Capability    string   `json:"capability"`
	Status        string   `json:"status"`
	PlanDigest    string   `json:"planDigest,omitempty"`
	Holes         []Hole   `json:"holes,omitempty"`
	UnknownInputs []string `json:"unknownInputs,omitempty"`
}

// digestDocument is what the digest covers of a document: every member,
// every entry with its attributes and every side effect, but neither the
// summary nor the digest itself. Empty and absent lists are alike
// (omitempty), so a document read back from its file digests the same.
type digestDocument struct {
	Version     string         `json:"version"`
	Members     []digestMember `json:"members"`
	Entries     []Entry        `json:"entries,omitempty"`
	SideEffects []SideEffect   `json:"sideEffects,omitempty"`
}

// ComputeDigest returns the digest a reviewer approves: DigestPrefix and the
// hex SHA-256 of the canonical JSON of every member's name, component,
// capability, plan digest, status, holes and unknown inputs, every entry
// with its attributes, and every side effect, in document order.
func (d *Document) ComputeDigest() (string, error) {
	dd := digestDocument{
		Version:     d.Version,
		Members:     make([]digestMember, len(d.Members)),
		Entries:     d.Entries,
		SideEffects: d.SideEffects,
	}
	for i, m := range d.Members {
		dd.Members[i] = digestMember{
			Name:          m.Name,
			Component:     m.Component,
			Capability:    m.Capability,
			Status:        m.Status,
			PlanDigest:    m.PlanDigest,
			Holes:         m.Holes,
			UnknownInputs: m.UnknownInputs,
		}
	}
	s, err := Digest(DigestPrefix, dd)
	if err != nil {
		return "", fmt.Errorf("change-set digest: %w", err)
	}
	return s, nil
}
