package kubectl

import (
	"strconv"

	"github.com/captf/captf/internal/preview/fieldpath"
)

// path names one field of an object (fieldpath.Path), written in the
// Plain syntax docs/preview-kubectl.md documents; the digest holds what it
// writes.
type path = fieldpath.Path

// lookup returns the value at p in obj and whether it is there. A string
// segment of digits indexes a list.
func lookup(obj any, p path) (any, bool) {
	cur := obj
	for _, seg := range p {
		switch node := cur.(type) {
		case map[string]any:
			key, ok := seg.(string)
			if !ok {
				key = strconv.Itoa(seg.(int))
			}
			v, ok := node[key]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, ok := seg.(int)
			if !ok {
				n, err := strconv.Atoi(seg.(string))
				if err != nil {
					return nil, false
				}
				i = n
			}
			if i < 0 || i >= len(node) {
				return nil, false
			}
			cur = node[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
