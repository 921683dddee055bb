package contract

import (
	"fmt"
	"strconv"
)

// Shape describes a JSON value as the validator checks it. It is read from the same schema
// tables the validator walks, so a description can never disagree with a check: docs/reference.md
// is generated from it, and a UI can build forms from it.
type Shape struct {
	// Name is the name of a shared object that appears in several places ("lineage",
	// "inheritance", "snapshot", ...; see [SharedShapes]), "event" for the elements of a
	// view's events; "" for an inline value.
	Name string
	// Type is "string", "integer" (a whole number in any notation), "number", "boolean",
	// "object", "array", or "any" (any JSON value).
	Type string
	// Nullable says that null is also accepted.
	Nullable bool
	// Const is the only value accepted, as JSON text ("\"AgentSessionEvent\"", "1"); "" when
	// any value of the type is.
	Const string
	// Enum lists the accepted strings; nil when any string is.
	Enum []string
	// MinLength and MaxLength bound a string's length in Unicode code points (MaxLength 0:
	// unbounded).
	MinLength, MaxLength int
	// Format is a further rule on a string: "timestamp" (RFC 3339, seconds optional, an
	// existing date, Z or ±hh:mm), "date-time" (RFC 3339 with seconds), "uri" (an absolute
	// URI) or "non-blank" (at least one non-whitespace character); "" for none.
	Format string
	// Minimum and Maximum bound a number (nil: unbounded); ExclusiveMinimum makes the minimum
	// itself invalid.
	Minimum, Maximum *int64
	ExclusiveMinimum bool
	// Fields are an object's fields, in schema order.
	Fields []Field
	// AnyFields says that an object also accepts members it does not list, of any JSON value.
	// Otherwise an object is closed: an unknown member is a problem (additionalProperties).
	AnyFields bool
	// Items describes each element of an array; MinItems and MaxItems bound its length
	// (MaxItems 0: unbounded).
	Items              *Shape
	MinItems, MaxItems int
}

// Field is one field of an object [Shape].
type Field struct {
	Name     string // the member name
	Required bool   // a document without the field is refused (rule required)
	Shape    *Shape // the value's shape
}

// sharedNames names the objects that appear in several places.
var sharedNames = map[*schema]string{
	lineageSchema:             "lineage",
	inheritanceSchema:         "inheritance",
	unavailableResourceSchema: "unavailable-resource",
	activeBranchSchema:        "active-branch",
	capabilitiesSchema:        "capabilities",
	snapshotSchema:            "snapshot",
	commandErrorSchema:        "command-error",
}

// SharedShapes lists the names of the shared objects a [Shape] may name, in the order a
// reader meets them.
var SharedShapes = []string{"command-error", "inheritance", "lineage", "active-branch", "unavailable-resource", "snapshot", "capabilities"}

// DescribeShared returns the shape of a shared object named in [SharedShapes].
func DescribeShared(name string) (*Shape, bool) {
	for s, n := range sharedNames {
		if n == name {
			return s.describe(), true
		}
	}
	return nil, false
}

// Describe returns the shape of a document kind (one of [DocumentKinds]). For an event and a
// command, "payload" is an open object here: its shape depends on the type, see
// [DescribeEventPayload] and [DescribeCommandPayload]. The cross-field rules of the kind are
// not part of a shape.
func Describe(kind string) (*Shape, error) {
	var s *schema
	switch kind {
	case KindEvent:
		s = eventHeader
	case KindCommand:
		s = commandHeader
	case KindView:
		d := viewSchema.describe()
		for i := range d.Fields {
			if d.Fields[i].Name == "events" {
				d.Fields[i].Shape.Items = eventHeader.describe() // each is checked as an event
				d.Fields[i].Shape.Items.Name = "event"
			}
		}
		return d, nil
	default:
		var ok bool
		if s, ok = plainSchemas[kind]; !ok {
			return nil, fmt.Errorf("unknown document kind %q (known: %v)", kind, DocumentKinds)
		}
	}
	return s.describe(), nil
}

// DescribeEventPayload returns the shape of the payload of an event type (one of
// [EventTypes]), and false for an unknown type.
func DescribeEventPayload(eventType string) (*Shape, bool) {
	s, ok := payloadSchemas[eventType]
	if !ok {
		return nil, false
	}
	return s.describe(), true
}

// DescribeCommandPayload returns the shape of the payload of a command type (one of
// [CommandTypes]), and false for an unknown type.
func DescribeCommandPayload(commandType string) (*Shape, bool) {
	s, ok := commandPayloadSchemas[commandType]
	if !ok {
		return nil, false
	}
	return s.describe(), true
}

var formatNames = map[sformat]string{fTimestamp: "timestamp", fDateTime: "date-time", fURI: "uri", fNotBlank: "non-blank"}

func (s *schema) describe() *Shape {
	d := &Shape{
		Name:      sharedNames[s],
		Type:      stypeNames[s.typ],
		Nullable:  s.nullable,
		Enum:      append([]string(nil), s.enum...),
		MinLength: s.minLen,
		MaxLength: s.maxLen,
		Format:    formatNames[s.format],
		AnyFields: s.open != nil,
		MinItems:  s.minItems,
		MaxItems:  s.maxItems,
	}
	if len(d.Enum) == 0 {
		d.Enum = nil
	}
	switch {
	case s.hasConst:
		d.Const = strconv.Quote(s.constStr)
	case s.constInt != nil:
		d.Const = strconv.FormatInt(*s.constInt, 10)
	}
	if s.hasMin {
		m := s.min
		d.Minimum, d.ExclusiveMinimum = &m, s.exclusiveMin
	}
	if s.hasMax {
		m := s.max
		d.Maximum = &m
	}
	for _, p := range s.props {
		d.Fields = append(d.Fields, Field{Name: p.name, Required: p.required, Shape: p.s.describe()})
	}
	if s.items != nil {
		d.Items = s.items.describe()
	}
	return d
}
