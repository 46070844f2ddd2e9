package preview

// Registry is the list of capabilities a command line offers, one per
// kind. A kind of spec 003's table without a Capability here is a step
// without plan.
type Registry []Capability

// Lookup returns the capability for kind, or nil.
func (r Registry) Lookup(kind string) Capability {
	for _, c := range r {
		if c.Kind() == kind {
			return c
		}
	}
	return nil
}

// Known reports whether a step of kind can appear in a project file: a
// kind of spec 003's table or of a registered capability.
func (r Registry) Known(kind string) bool {
	_, inTable := planKinds[kind]
	return inTable || r.Lookup(kind) != nil
}

// plans reports whether a step of kind is a planning step: it has a
// registered capability, or spec 003 says its kind plans (then a missing
// capability fails the member rather than hiding what it would change).
func (r Registry) plans(kind string) bool {
	return r.Lookup(kind) != nil || planKinds[kind]
}
