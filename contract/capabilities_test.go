package contract

import (
	"encoding/json"
	"testing"
)

// TestCapabilitiesHas checks Has for every capability name against the JSON field of the same
// name: absent takes the default (text true, others false), and a set value wins.
func TestCapabilitiesHas(t *testing.T) {
	for _, name := range CapabilityNames {
		var absent Capabilities
		if got := absent.Has(name); got != (name == "text") {
			t.Errorf("absent %s: Has = %v", name, got)
		}
		for _, v := range []bool{true, false} {
			var c Capabilities
			b, _ := json.Marshal(map[string]bool{name: v})
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			if got := c.Has(name); got != v {
				t.Errorf("%s set to %v: Has = %v", name, v, got)
			}
		}
	}
	if (Capabilities{}).Has("flying") {
		t.Error("an unknown capability reports true")
	}
}
