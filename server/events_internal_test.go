package server

import "testing"

// TestEventsBufs: the read buffers are kept across garbage collections, at most keptEventsBufs
// of them and none larger than maxPooledEventsBuf, and come back empty.
func TestEventsBufs(t *testing.T) {
	for len(eventsBufs) > 0 {
		<-eventsBufs
	}
	big := make([]byte, 10, maxPooledEventsBuf+1)
	putEventsBuf(&big)
	if n := len(eventsBufs); n != 0 {
		t.Fatalf("a buffer over maxPooledEventsBuf was kept (%d kept)", n)
	}
	for range keptEventsBufs + 2 {
		b := make([]byte, 10, 1<<20)
		putEventsBuf(&b)
	}
	if n := len(eventsBufs); n != keptEventsBufs {
		t.Fatalf("%d buffers kept, want %d", n, keptEventsBufs)
	}
	for range keptEventsBufs + 1 {
		if bp := getEventsBuf(); len(*bp) != 0 || cap(*bp) == 0 {
			t.Fatalf("got a buffer of length %d, capacity %d", len(*bp), cap(*bp))
		}
	}
}
