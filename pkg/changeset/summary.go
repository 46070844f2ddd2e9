package changeset

import "strings"

// UnboundPrefix starts the reason of a hole left by a step whose deployed
// content the digest cannot name (a shell step, a git-ignored directory).
const UnboundPrefix = "unbound:"

// CountsKnown reports whether m's counts can be told: not when m failed or
// is held, nor when a hole of the whole member (one without an address)
// says the plan could not ask, such as inputs that have no value yet. An
// "unbound:" hole leaves the counts known: they are what the plan saw.
func CountsKnown(m *Member) bool {
	if m.Status == StatusFailed || m.Status == StatusHeld {
		return false
	}
	for _, h := range m.Holes {
		if h.Address == "" && !strings.HasPrefix(h.Reason, UnboundPrefix) {
			return false
		}
	}
	return true
}

// Summarize counts each member's creates, updates, replaces and deletes;
// no-op, read and forget entries are left out of the counts.
func (d *Document) Summarize() *Summary {
	s := &Summary{Members: make([]MemberCounts, 0, len(d.Members))}
	index := make(map[string]int, len(d.Members))
	for i := range d.Members {
		m := &d.Members[i]
		index[m.Name] = i
		s.Members = append(s.Members, MemberCounts{Name: m.Name, Status: m.Status, Known: CountsKnown(m)})
	}
	for _, e := range d.Entries {
		i, ok := index[e.Member]
		if !ok {
			continue
		}
		c := &s.Members[i]
		switch e.Action {
		case ActionCreate:
			c.Create++
		case ActionUpdate:
			c.Update++
		case ActionReplace:
			c.Replace++
		case ActionDelete:
			c.Delete++
		}
	}
	return s
}
