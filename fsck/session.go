package fsck

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/wire"
)

// sessionCheck checks one session's rows.
type sessionCheck struct {
	id       string
	archives *archives // nil: archives are not checked
	max      int
	events   *atomic.Int64

	findings []Finding
	dropped  int

	// The log as read so far: where each eventId and idempotencyKey is, and the runs folded.
	ids, keys map[string]int64
	runs      map[string]*contract.Run
	order     []string // run ids in creation order
	firstLive int      // order[:firstLive] have ended (an ended run never becomes active again)
	foldOK    bool     // false when the fold lacks the start of the log (compacted, no archive)
}

func (c *sessionCheck) find(check string, seq *int64, format string, args ...any) {
	if len(c.findings) >= c.max {
		c.dropped++
		return
	}
	c.findings = append(c.findings, Finding{Check: check, SessionID: c.id, Sequence: seq, Message: fmt.Sprintf(format, args...)})
}

func (c *sessionCheck) result() []Finding {
	if c.dropped > 0 {
		c.findings = append(c.findings, Finding{Check: CheckDatabase, SessionID: c.id,
			Message: fmt.Sprintf("%d more findings in this session were left out (at most %d are listed per session)", c.dropped, c.max)})
	}
	return c.findings
}

func at(seq int64) *int64 { return &seq }

// run checks the session's rows; it is the callback of Inspector.InspectSession.
func (c *sessionCheck) run(raw *store.RawSession) error {
	rec := c.checkRecord(raw)
	lc, ok := c.checkLifecycle(raw, rec)
	c.ids, c.keys = map[string]int64{}, map[string]int64{}
	c.runs = map[string]*contract.Run{}
	c.foldOK = true
	next := int64(0)
	compacted := int64(-1) // the compaction point, -1 for a log never compacted
	if ok && lc.CompactedThrough != nil {
		next = *lc.CompactedThrough + 1
		compacted = *lc.CompactedThrough
		c.foldOK = c.foldArchive(lc)
	}
	var n int64
	ch := c.newChain(raw)
	var usage store.UsageRollup
	usageOK := compacted < 0 && raw.UsageRead
	err := raw.Events(func(e *store.StoredEvent) error {
		n++
		if usageOK {
			if err := usage.Add(e); err != nil {
				usageOK = false // the event's own finding says why
			}
		}
		if n%4096 == 0 {
			c.events.Add(4096)
		}
		switch {
		case e.Sequence > next:
			if next == e.Sequence-1 {
				c.find(CheckSequence, at(next), "sequence %d is missing from the log (the next stored event is %d)", next, e.Sequence)
			} else {
				c.find(CheckSequence, at(next), "sequences %d to %d are missing from the log (the next stored event is %d)", next, e.Sequence-1, e.Sequence)
			}
		case e.Sequence < next && e.Sequence > compacted:
			c.find(CheckSequence, at(e.Sequence), "the log holds sequence %d twice (or out of order, after sequence %d)", e.Sequence, next-1)
		case e.Sequence < next:
			c.find(CheckSequence, at(e.Sequence), "the log holds sequence %d, at or before its compaction point %d", e.Sequence, compacted)
		}
		ch.link(e, e.Sequence == next)
		next = max(next, e.Sequence+1)
		c.checkEvent(e)
		return nil
	})
	c.events.Add(n % 4096)
	if err != nil {
		return err
	}
	if last := next - 1; last != raw.LastSequence {
		if last < raw.LastSequence {
			c.find(CheckSequence, at(next), "the session's last sequence is %d but the log ends at %d: sequences %d to %d are missing", raw.LastSequence, last, next, raw.LastSequence)
		} else {
			c.find(CheckSequence, at(raw.LastSequence+1), "the session's last sequence is %d but the log goes on to %d", raw.LastSequence, last)
		}
	}
	ch.end(raw, next-1)
	c.checkRuns(raw)
	c.checkCommandResults(raw, lc)
	if usageOK {
		if ok, why := store.UsageRowsEqual(raw.UsageDays, raw.UsageTools, usage.Days(), usage.Tools()); !ok {
			c.find(CheckUsage, nil, "the usage rollup holds %s; run sessiond usage-rebuild", why)
		}
	}
	return nil
}

// chainCheck follows a log's hash chain (store/chain.go) as fsck reads its events: it hashes
// each event's stored bytes onto the running hash and compares it wherever a hash is stored
// (every store.ChainEvery-th event, and the session's head), so a rewritten event is placed
// between two stored hashes, at most store.ChainEvery events apart.
type chainCheck struct {
	c    *sessionCheck
	run  store.ChainHash // the hash of the last event read, as its bytes chain
	ok   bool            // run is known (false after a gap, until the next stored hash)
	from int64           // the first sequence hashed since the last stored hash checked
	seen bool            // an event was read
	// After a stored hash that did not match, alt goes on from what the events hashed to
	// there: when the next stored hash matches alt, it was that stored hash that was damaged,
	// not an event, and the damage is reported once.
	alt   store.ChainHash
	altOK bool
}

// newChain starts the chain at the session's base (store.ChainGenesis when none is recorded).
func (c *sessionCheck) newChain(raw *store.RawSession) *chainCheck {
	base, ok := store.ChainHead(raw.BaseHash)
	if !ok {
		c.find(CheckChain, nil, "the session's chain base is %d bytes, not a SHA-256 hash", len(raw.BaseHash))
	}
	return &chainCheck{c: c, run: base, ok: ok, from: -1}
}

// link hashes e onto the chain and checks its stored hash, if it has one; inOrder is false
// when e does not follow the event before it (a gap or a repeat, reported by the sequence
// check): the chain is then unknown until the next stored hash.
func (ch *chainCheck) link(e *store.StoredEvent, inOrder bool) {
	c, seq := ch.c, e.Sequence
	if !ch.seen || !inOrder {
		ch.from = seq
	}
	ch.seen = true
	if !inOrder {
		ch.ok = false
	}
	if ch.ok {
		ch.run = store.ChainNext(ch.run, e.Data)
	}
	if ch.altOK = ch.altOK && inOrder; ch.altOK {
		ch.alt = store.ChainNext(ch.alt, e.Data)
	}
	if e.Hash == nil {
		if store.ChainMarked(seq) {
			c.find(CheckChain, at(seq), "the event has no chain hash (every %dth event stores one)", store.ChainEvery)
		}
		return
	}
	stored, ok := store.ChainHead(e.Hash)
	switch {
	case !ok:
		c.find(CheckChain, at(seq), "the event's chain hash is %d bytes, not a SHA-256 hash", len(e.Hash))
		ch.ok = false
		return
	case !store.ChainMarked(seq):
		c.find(CheckChain, at(seq), "the event stores a chain hash, which only every %dth event does", store.ChainEvery)
	case ch.ok && stored != ch.run && ch.altOK && stored == ch.alt:
		// The events since the last finding chain to this hash from what they hashed to
		// there: that stored hash was the damage, already reported.
	case ch.ok && stored != ch.run:
		c.find(CheckChain, at(seq), "the chain does not hold between sequences %d and %d: the stored events hash to %x there but the hash stored with sequence %d is %x; an event of that range (or this hash) was rewritten after it was appended", ch.from, seq, ch.run[:8], seq, stored[:8])
		ch.alt, ch.altOK = ch.run, true
		ch.run, ch.ok, ch.from = stored, true, seq+1
		return
	}
	ch.altOK = false
	ch.run, ch.ok, ch.from = stored, true, seq+1
}

// end compares the session's head with the chain of the log's last event (last, -1 for none).
func (ch *chainCheck) end(raw *store.RawSession, last int64) {
	c := ch.c
	if last != raw.LastSequence {
		return // the sequence check reports the log's end; the hashes would only repeat it
	}
	head, ok := store.ChainHead(raw.HeadHash)
	switch {
	case !ok:
		c.find(CheckChain, at(raw.LastSequence), "the session's head hash is %d bytes, not a SHA-256 hash", len(raw.HeadHash))
	case raw.HeadHash == nil && ch.seen:
		c.find(CheckChain, at(raw.LastSequence), "the session's head records no chain hash for its last event")
	case ch.seen && ch.ok && head != ch.run && ch.from <= last:
		c.find(CheckChain, at(raw.LastSequence), "the chain does not hold between sequences %d and %d: the stored events hash to %x but the session's head says %x; an event of that range was rewritten after it was appended (or the head was)", ch.from, last, ch.run[:8], head[:8])
	case ch.seen && ch.ok && head != ch.run:
		c.find(CheckChain, at(raw.LastSequence), "the session's head hash is %x but the hash stored with its last event is %x: the head was rewritten", head[:8], ch.run[:8])
	case !ch.seen && raw.HeadHash != nil && raw.BaseHash != nil && head != ch.run:
		c.find(CheckChain, nil, "the whole log was compacted away and the session's head hash %x is not its chain base %x", head[:8], ch.run[:8])
	}
}

// checkRecord checks the record, snapshot, lineage and active branch against the contract
// and the columns; it returns the decoded record, nil when it does not decode.
func (c *sessionCheck) checkRecord(raw *store.RawSession) *contract.SessionRecord {
	for _, part := range []struct {
		kind, what string
		data       []byte
	}{
		{contract.KindSession, "record", raw.Record},
		{contract.KindSnapshot, "snapshot", raw.Snapshot},
		{contract.KindLineage, "lineage", raw.Lineage},
		{contract.KindActiveBranch, "active branch", raw.ActiveBranch},
	} {
		if part.data == nil && part.kind != contract.KindSession && part.kind != contract.KindSnapshot {
			continue
		}
		if err := contract.Validate(part.kind, part.data, contract.Limits{}); err != nil {
			c.find(CheckRecord, nil, "the stored %s breaks the contract: %v", part.what, err)
		}
	}
	var rec contract.SessionRecord
	if err := json.Unmarshal(raw.Record, &rec); err != nil {
		c.find(CheckRecord, nil, "the stored record does not decode: %v", err)
		return nil
	}
	if rec.SessionID != raw.ID {
		c.find(CheckRecord, nil, "the record's session_id is %q but it is stored under %q", rec.SessionID, raw.ID)
	}
	if rec.Status != raw.Status {
		c.find(CheckRecord, nil, "the record's status is %q but the status column says %q", rec.Status, raw.Status)
	}
	return &rec
}

// checkLifecycle checks the lifecycle state and its agreement with the record and the
// archives; ok is false when it does not decode.
func (c *sessionCheck) checkLifecycle(raw *store.RawSession, rec *contract.SessionRecord) (lc wire.Lifecycle, ok bool) {
	if raw.Lifecycle != nil {
		dec := json.NewDecoder(bytes.NewReader(raw.Lifecycle))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&lc); err != nil {
			c.find(CheckLifecycle, nil, "the stored lifecycle state does not decode: %v", err)
			return lc, false
		}
	}
	ct := lc.CompactedThrough
	if ct != nil && (*ct < 0 || *ct > raw.LastSequence) {
		c.find(CheckLifecycle, nil, "the log is compacted through sequence %d but the session's last sequence is %d", *ct, raw.LastSequence)
	}
	if rec != nil && rec.Status == contract.SessionStatusArchived && lc.LastArchiveName == "" {
		c.find(CheckLifecycle, nil, "the session is archived but its lifecycle state names no archive")
	}
	if rec != nil && rec.Status == contract.SessionStatusArchived && rec.ArchivePath.Get() == "" {
		c.find(CheckLifecycle, nil, "the session is archived but its record has no archive_path")
	}
	if ct != nil && lc.LastArchiveName == "" {
		c.find(CheckLifecycle, nil, "the log is compacted through sequence %d but no archive holds it (the lifecycle state names none)", *ct)
	}
	if c.archives == nil || lc.LastArchiveName == "" {
		return lc, true
	}
	f := c.archives.byName[lc.LastArchiveName]
	switch {
	case f == nil && ct != nil:
		c.find(CheckArchive, nil, "the log through sequence %d was compacted away and its only copy, archive %s, is missing from the archive directory", *ct, lc.LastArchiveName)
	case f == nil:
		// The log is all in the store; retention may have deleted an old archive.
	case f.problem != "" && ct != nil:
		c.find(CheckArchive, nil, "the log through sequence %d was compacted away and its only copy, archive %s, fails verification: %s", *ct, lc.LastArchiveName, f.problem)
	case f.problem != "":
		// Reported once, as a finding of the archive itself.
	case f.sessionID != raw.ID:
		c.find(CheckArchive, nil, "the session's last archive %s holds session %q", lc.LastArchiveName, f.sessionID)
	case lc.LastArchiveChecksum != "" && f.checksum != lc.LastArchiveChecksum:
		c.find(CheckArchive, nil, "archive %s has checksum %s but the session recorded %s when it was written", lc.LastArchiveName, f.checksum, lc.LastArchiveChecksum)
	case ct != nil && f.lastSeq < *ct:
		c.find(CheckArchive, nil, "the log is compacted through sequence %d but archive %s holds only up to %d", *ct, lc.LastArchiveName, f.lastSeq)
	default:
		c.checkArchiveHead(raw, f, ct)
	}
	return lc, true
}

// checkArchiveHead compares the chain head an archive recorded (the store's head when it was
// written) with the store's chain at the same sequence: the chain's base when the log was
// compacted through the archive's last event, the session's head when nothing was appended
// since. A log rewritten in the store after it was archived, hashes and head included,
// differs there.
func (c *sessionCheck) checkArchiveHead(raw *store.RawSession, f *archiveFile, ct *int64) {
	if f.chainHead == "" {
		return // a version 1 archive records none
	}
	var stored []byte
	switch {
	case ct != nil && *ct == f.lastSeq && raw.BaseHash != nil:
		stored = raw.BaseHash
	case f.lastSeq == raw.LastSequence && raw.HeadHash != nil:
		stored = raw.HeadHash
	default:
		return
	}
	if got := hex.EncodeToString(stored); got != f.chainHead {
		c.find(CheckChain, at(f.lastSeq), "archive %s recorded the chain head %s at sequence %d but the store's chain has %s there: the log was rewritten after it was archived", filepath.Base(f.path), f.chainHead[:16], f.lastSeq, got[:min(16, len(got))])
	}
}

// foldArchive reads the compacted start of the log from the session's last archive into the
// fold, when the archive is there and verified; it reports whether it could.
func (c *sessionCheck) foldArchive(lc wire.Lifecycle) bool {
	if c.archives == nil {
		return false
	}
	f := c.archives.byName[lc.LastArchiveName]
	if f == nil || f.problem != "" || f.sessionID != c.id || f.lastSeq < *lc.CompactedThrough {
		return false
	}
	content, err := f.content()
	if err != nil {
		return false
	}
	for i, raw := range content.Events {
		if int64(i) > *lc.CompactedThrough {
			break
		}
		ev, err := contract.CheckEvent(raw, contract.Limits{MaxBytes: store.MaxEventBytes})
		if err != nil {
			return false // the archive verified when written; restore would refuse it
		}
		c.ids[ev.EventID], c.keys[ev.IdempotencyKey] = int64(i), int64(i)
		c.fold(ev, int64(i))
	}
	return true
}

// checkEvent checks one stored event against the contract, its columns and the log so far,
// and folds it into the runs.
func (c *sessionCheck) checkEvent(e *store.StoredEvent) {
	seq := e.Sequence
	if prev, dup := c.ids[e.EventID]; dup {
		c.find(CheckDuplicate, at(seq), "eventId %q is also the event at sequence %d", e.EventID, prev)
	} else {
		c.ids[e.EventID] = seq
	}
	if prev, dup := c.keys[e.IdempotencyKey]; dup {
		c.find(CheckDuplicate, at(seq), "idempotencyKey %q is also the event at sequence %d's", e.IdempotencyKey, prev)
	} else {
		c.keys[e.IdempotencyKey] = seq
	}
	ev, err := contract.CheckEvent(e.Data, contract.Limits{MaxBytes: store.MaxEventBytes})
	if err != nil {
		c.find(CheckEvent, at(seq), "the stored event breaks the contract: %v", err)
		return
	}
	switch {
	case ev.Sequence != seq:
		c.find(CheckEvent, at(seq), "the event says sequence %d but is stored at %d", ev.Sequence, seq)
	case ev.SessionID != c.id:
		c.find(CheckEvent, at(seq), "the event names session %q", ev.SessionID)
	case ev.EventID != e.EventID:
		c.find(CheckEvent, at(seq), "the event's eventId is %q but its column says %q", ev.EventID, e.EventID)
	case ev.IdempotencyKey != e.IdempotencyKey:
		c.find(CheckEvent, at(seq), "the event's idempotencyKey is %q but its column says %q", ev.IdempotencyKey, e.IdempotencyKey)
	case ev.EventType != e.EventType:
		c.find(CheckEvent, at(seq), "the event's eventType is %q but its column says %q", ev.EventType, e.EventType)
	case ev.RunID != e.RunID:
		c.find(CheckEvent, at(seq), "the event's runId is %q but its column says %q", ev.RunID, e.RunID)
	case !ev.SameContent(e.Data):
		c.find(CheckEvent, at(seq), "the stored event is not in canonical form (readers would get other bytes than the ones appended)")
	}
	c.fold(ev, seq)
}

// fold applies a run status event to the runs, as the store's projection does.
func (c *sessionCheck) fold(ev *contract.EncodedEvent, seq int64) {
	f := ev.RunStatus
	if f == nil {
		return
	}
	prev := c.runs[f.RunID]
	if prev == nil && !c.foldOK {
		return // the run may have started in the compacted part
	}
	if prev == nil {
		// The one-active-run rule, as the append applied it: a run created queued may have been
		// enqueued behind the active one (the log does not say which multitask strategy let
		// it in, so fsck allows it), any other new run needs no run active before it.
		for c.firstLive < len(c.order) && contract.IsTerminal(c.runs[c.order[c.firstLive]].Status) {
			c.firstLive++
		}
		if c.firstLive < len(c.order) { // the earliest active run decides
			if err := contract.CheckNewRun(c.runs[c.order[c.firstLive]], *f, true); err != nil {
				c.find(CheckRuns, at(seq), "%v", err)
			}
		}
	}
	run, err := contract.ApplyRunStatus(prev, c.id, *f)
	if err != nil {
		c.find(CheckRuns, at(seq), "the log's run status breaks the run state machine: %v", err)
		return
	}
	if prev == nil {
		c.order = append(c.order, f.RunID)
	}
	c.runs[f.RunID] = run
}

// checkRuns compares the run projection with the fold of the log.
func (c *sessionCheck) checkRuns(raw *store.RawSession) {
	stored := map[string]bool{}
	for i, r := range raw.Runs {
		stored[r.RunID] = true
		var run contract.Run
		if err := json.Unmarshal(r.Data, &run); err != nil {
			c.find(CheckRuns, nil, "run %q's stored projection does not decode: %v", r.RunID, err)
			continue
		}
		if run.RunID != r.RunID {
			c.find(CheckRuns, nil, "run %q's stored projection says runId %q", r.RunID, run.RunID)
		}
		if r.Status != "" && r.Status != run.Status {
			c.find(CheckRuns, nil, "run %q's status column says %q but its projection says %q", r.RunID, r.Status, run.Status)
		}
		if r.Status == "" && r.Active == contract.IsTerminal(run.Status) {
			c.find(CheckRuns, nil, "run %q's active column says %v but its status is %q", r.RunID, r.Active, run.Status)
		}
		if !c.foldOK {
			continue
		}
		folded := c.runs[r.RunID]
		if folded == nil {
			c.find(CheckRuns, nil, "run %q is in the projection but no event of the log creates it", r.RunID)
			continue
		}
		if i < len(c.order) && c.order[i] != r.RunID {
			c.find(CheckRuns, nil, "run %q is number %d in the projection but the log creates run %q at that place", r.RunID, i, c.order[i])
		}
		a, _ := json.Marshal(folded)
		b, _ := json.Marshal(&run)
		if !bytes.Equal(a, b) {
			c.find(CheckRuns, nil, "run %q's projection is %s but the log folds to %s", r.RunID, b, a)
		}
	}
	if !c.foldOK {
		return
	}
	for _, id := range c.order {
		if !stored[id] {
			c.find(CheckRuns, nil, "the log creates run %q but the projection does not hold it", id)
		}
	}
}

// checkCommandResults checks each stored command result against the contract, its key and
// session, and the events it says the command appended.
func (c *sessionCheck) checkCommandResults(raw *store.RawSession, lc wire.Lifecycle) {
	compacted := int64(-1)
	if lc.CompactedThrough != nil && !c.foldOK {
		compacted = *lc.CompactedThrough
	}
	for _, r := range raw.CommandResults {
		if err := contract.Validate(contract.KindCommandResult, r.Result, contract.Limits{}); err != nil {
			c.find(CheckCommandResult, nil, "the result stored under key %q breaks the contract: %v", r.Key, err)
			continue
		}
		var res contract.CommandResult
		if err := json.Unmarshal(r.Result, &res); err != nil {
			c.find(CheckCommandResult, nil, "the result stored under key %q does not decode: %v", r.Key, err)
			continue
		}
		if res.IdempotencyKey != r.Key || res.SessionID != c.id {
			c.find(CheckCommandResult, nil, "the result stored under key %q is command %q's of session %q with key %q", r.Key, res.CommandID, res.SessionID, res.IdempotencyKey)
			continue
		}
		if res.Operation != nil || res.Outcome != "accepted" {
			continue // a fork's events are in the new session; other outcomes appended nothing
		}
		var last int64 = -1
		for _, id := range res.ResultEventIDs {
			seq, ok := c.ids[id]
			if !ok {
				if res.AcceptedSequence == nil || *res.AcceptedSequence > compacted {
					c.find(CheckCommandResult, nil, "command %q (key %q) appended event %q, which the log does not hold", res.CommandID, r.Key, id)
				}
				continue
			}
			last = seq
		}
		if res.AcceptedSequence != nil && last >= 0 && *res.AcceptedSequence != last {
			c.find(CheckCommandResult, at(*res.AcceptedSequence), "command %q (key %q) says its last event is at sequence %d but the log has it at %d", res.CommandID, r.Key, *res.AcceptedSequence, last)
		}
	}
}
