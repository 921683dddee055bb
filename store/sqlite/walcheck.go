package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// This file reads SQLite's write-ahead log itself, as SQLite's recovery does
// (https://www.sqlite.org/fileformat.html#the_write_ahead_log), to see what SQLite hides: on
// opening a log, SQLite takes its frames up to the first one whose salts or checksum do not
// hold and silently ignores the rest, so a damaged frame in the middle of the log drops every
// commit after it, acknowledged ones included, and the database then looks sound.

// The WAL's header and frame header sizes, and the magic numbers of its two checksum byte
// orders.
const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
	walMagicLE         = 0x377f0682
	walMagicBE         = 0x377f0683
)

// walChecksum continues SQLite's WAL checksum (s0, s1) over b, whose length is a multiple of
// 8, reading its 32-bit words in order.
func walChecksum(order binary.ByteOrder, s0, s1 uint32, b []byte) (uint32, uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	return s0, s1
}

// checkWAL reads the write-ahead log at path and returns what SQLite would silently ignore of
// it that may hold acknowledged data: frames of the log's current generation (its salts) after
// a frame whose checksum fails, when they carry a commit. A log that does not exist, is empty,
// or whose damage touches no commit after it (a frame torn at the end by a crash, the frames
// of an earlier generation left behind a reset) gives nothing.
func checkWAL(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the write-ahead log: %w", err)
	}
	if len(data) < walHeaderSize {
		return nil, nil // no header yet: no frame either
	}
	var order binary.ByteOrder
	switch binary.BigEndian.Uint32(data) {
	case walMagicLE:
		order = binary.LittleEndian
	case walMagicBE:
		order = binary.BigEndian
	default:
		return []string{fmt.Sprintf("write-ahead log %s: its header has no WAL magic number, so SQLite ignores all %d bytes of it: whatever commits it held since the last checkpoint are lost to the database", path, len(data))}, nil
	}
	pageSize := int(binary.BigEndian.Uint32(data[8:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return []string{fmt.Sprintf("write-ahead log %s: its header gives page size %d, which SQLite refuses, so it ignores the whole log", path, pageSize)}, nil
	}
	salt1, salt2 := binary.BigEndian.Uint32(data[16:]), binary.BigEndian.Uint32(data[20:])
	s0, s1 := walChecksum(order, 0, 0, data[:24])
	headerOK := s0 == binary.BigEndian.Uint32(data[24:]) && s1 == binary.BigEndian.Uint32(data[28:])
	frameSize := walFrameHeaderSize + pageSize
	frames := (len(data) - walHeaderSize) / frameSize

	// frame returns frame i's header and page, and whether its checksum holds when continued
	// from (c0, c1).
	frame := func(i int, c0, c1 uint32) (hdr, page []byte, n0, n1 uint32, ok bool) {
		off := walHeaderSize + i*frameSize
		hdr, page = data[off:off+walFrameHeaderSize], data[off+walFrameHeaderSize:off+frameSize]
		n0, n1 = walChecksum(order, c0, c1, hdr[:8])
		n0, n1 = walChecksum(order, n0, n1, page)
		ok = n0 == binary.BigEndian.Uint32(hdr[16:]) && n1 == binary.BigEndian.Uint32(hdr[20:])
		return hdr, page, n0, n1, ok
	}
	ours := func(hdr []byte) bool {
		return binary.BigEndian.Uint32(hdr[8:]) == salt1 && binary.BigEndian.Uint32(hdr[12:]) == salt2
	}
	bad := -1 // the first frame SQLite stops at
	if headerOK {
		for i := range frames {
			hdr, _, n0, n1, ok := frame(i, s0, s1)
			if !ours(hdr) {
				return nil, nil // the rest is an earlier generation's: ignored by design
			}
			if !ok {
				bad = i
				break
			}
			s0, s1 = n0, n1
		}
		if bad < 0 {
			return nil, nil
		}
	} else {
		bad = 0
	}
	// After the bad frame: the frames of this generation whose checksums hold when continued
	// from the stored checksum of the frame before them were written whole, after it; the
	// commits among them were made (and, with sessiond's syncs, acknowledged) and are lost.
	lost, commits := 0, 0
	for i := bad; i < frames; i++ {
		hdr, _, _, _, _ := frame(i, 0, 0)
		if !ours(hdr) {
			break
		}
		if i > bad {
			prev, _, _, _, _ := frame(i-1, 0, 0)
			if _, _, _, _, ok := frame(i, binary.BigEndian.Uint32(prev[16:]), binary.BigEndian.Uint32(prev[20:])); !ok {
				break // not written whole: the end of what was written after the bad frame
			}
			lost++
			if binary.BigEndian.Uint32(hdr[4:]) != 0 {
				commits++
			}
		}
	}
	if commits == 0 {
		return nil, nil // only a frame torn at the end: an append that was never acknowledged
	}
	what := fmt.Sprintf("frame %d of %d fails its checksum", bad+1, frames)
	if !headerOK {
		what = "its header fails its checksum"
	}
	return []string{fmt.Sprintf("write-ahead log %s: %s; SQLite ignores it and the %d frames after it, which were written whole and hold %d commits: acknowledged events in them are possibly lost (the database does not show them, and no other check can see it)", path, what, lost, commits)}, nil
}
