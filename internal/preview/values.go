package preview

import (
	"encoding/json"
	"fmt"
)

// KindOf names the kind of a value decoded from YAML or JSON — null, a
// string, a boolean, a number, a list, a map — never the value itself, for
// an error about an input of the wrong kind.
func KindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return "a number"
	case []any, []string:
		return "a list"
	case map[string]any, map[any]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}
