package contract

// CheckEventValue validates one already-parsed event (for example an element of a JSON array
// parsed with [Parse]) and returns it encoded, or the problems found. The caller is responsible
// for the parse limits; the event's own depth is not re-checked.
func CheckEventValue(v *Value) (*EncodedEvent, []Problem) {
	var c checker
	c.event(v)
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	return encodeEvent(v), nil
}
