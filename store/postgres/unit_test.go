package postgres

import (
	"strings"
	"testing"
	"time"
)

func TestCommitPayload(t *testing.T) {
	long := strings.Repeat("é", 4000) // 8000 bytes
	for _, c := range []struct {
		name, sid string
		sk, last  int64
		want      string
	}{
		{"short", "S-1", 7, 41, "c 41 S-1"},
		{"spaces kept", "S with space", 7, 0, "c 0 S with space"},
		{"256 code points of 4 bytes", strings.Repeat("😀", 256), 7, 9, "c 9 " + strings.Repeat("😀", 256)},
		{"too long for NOTIFY", long, 123, 5, "k 5 123"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := commitPayload(c.sid, c.sk, c.last)
			if got != c.want {
				t.Errorf("commitPayload = %.60q, want %.60q", got, c.want)
			}
			if len(got) > maxNotifyPayload {
				t.Errorf("payload of %d bytes is over PostgreSQL's limit", len(got))
			}
		})
	}
}

func TestChannelFor(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{"public", "sessiond_commits"},
		{"tenant_a", "sessiond_commits:tenant_a"},
		{strings.Repeat("x", 60), "sessiond_commits:"},
	} {
		got := channelFor(c.schema)
		if !strings.HasPrefix(got, c.want) || len(got) > 63 {
			t.Errorf("channelFor(%.20q) = %q, want %q... of at most 63 bytes", c.schema, got, c.want)
		}
	}
	if channelFor(strings.Repeat("x", 60)) == channelFor(strings.Repeat("x", 61)) {
		t.Error("two long schemas share a channel")
	}
}

func TestDeliveredSet(t *testing.T) {
	var d deliveredSet
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		id   string
		last int64
		at   time.Duration
		want bool
	}{
		{"a", 3, 0, true},
		{"a", 3, 0, false},                // the same commit again (listener after the appender)
		{"a", 1, 0, false},                // a lower one late
		{"b", 0, 0, true},                 // another session
		{"a", 9, 0, true},                 // moves on
		{"a", 5, 61 * time.Second, false}, // remembered across one rotation
		{"a", 6, 3 * time.Minute, true},   // forgotten after two: delivered (harmless)
	} {
		if got := d.advance(c.id, c.last, t0.Add(c.at)); got != c.want {
			t.Errorf("advance(%s, %d, +%v) = %v, want %v", c.id, c.last, c.at, got, c.want)
		}
	}
}
