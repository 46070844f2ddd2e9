package planconfig

// Moved is a block that an apply would run and that differs from the
// approved plan's: Kind is "changed" (another digest) or "added" (the
// approved plan did not run it). A block the approved plan ran and this
// one does not is no risk and not reported.
type Moved struct {
	Address string `json:"address"`
	Block   string `json:"block"`
	Kind    string `json:"kind"`
}

// Compare returns the blocks of fresh that moved relative to approved, in
// fresh's order.
func Compare(approved, fresh []Block) []Moved {
	was := make(map[[2]string]string, len(approved))
	for _, b := range approved {
		was[[2]string{b.Address, b.Block}] = b.Digest
	}
	var moved []Moved
	for _, b := range fresh {
		d, ok := was[[2]string{b.Address, b.Block}]
		switch {
		case !ok:
			moved = append(moved, Moved{b.Address, b.Block, "added"})
		case d != b.Digest:
			moved = append(moved, Moved{b.Address, b.Block, "changed"})
		}
	}
	return moved
}
