package web_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserTabsShareConnections: over plain HTTP/1.1 the browser has 6 connections to the
// server for all its tabs. Ten tabs follow eight sessions (three on the same one) and the
// sessions list: each gets every new event, because the tabs' streams go through one shared
// worker that opens each stream once, holds at most 4 open and polls the rest, leaving
// connections for the pages' own requests. Each tab opening its own EventSource, as the page
// did, leaves the seventh tab connecting forever.
func TestBrowserTabsShareConnections(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	const sessions = 8
	for i := range sessions {
		id := fmt.Sprintf("S-tab%d", i)
		s.create(t, id)
		s.appendEvents(t, id, msg(id, "m0", "user", "hello"))
	}
	ids := []string{}
	for i := range sessions {
		ids = append(ids, fmt.Sprintf("S-tab%d", i))
	}
	ids = append(ids, "S-tab0", "S-tab0")
	tabs := []context.Context{ctx}
	for range len(ids) { // one more: the sessions list
		tctx, cancel := chromedp.NewContext(ctx)
		t.Cleanup(cancel)
		tabs = append(tabs, tctx)
	}
	run(t, tabs[0], "the sessions list", chromedp.Navigate(s.ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`.conn[data-state="live"]`)))
	for i, id := range ids {
		run(t, tabs[i+1], "open "+id, chromedp.Navigate(s.ts.URL+"/#/s/"+id),
			waitJS(`!!document.querySelector('.conn[data-state="live"], .conn[data-state="polled"]')`))
	}
	for i := range sessions {
		id := fmt.Sprintf("S-tab%d", i)
		s.appendEvents(t, id, msg(id, "m1", "assistant", "news for "+id))
	}
	for i, id := range ids {
		run(t, tabs[i+1], "the new event in "+id, waitJS(`document.querySelector('main').dataset.lastSequence === '1'`),
			waitJS(fmt.Sprintf(`(document.querySelector('[data-message-id="m1"]')?.textContent || '').includes('news for %s')`, id)))
	}
	s.create(t, "S-tab-new")
	run(t, tabs[0], "the list's live update", waitJS(`!!document.querySelector('tr[data-session="S-tab-new"]')`))
	polled := 0
	for i := range ids {
		polled += eval[int](t, tabs[i+1], `document.querySelectorAll('.conn[data-state="polled"]').length`)
	}
	// Streams: the list's feed, and S-tab0..S-tab2 (the first sessions opened); the other five
	// sessions are polled.
	if polled != 5 {
		t.Errorf("%d tabs follow their session by polling, want 5 (4 streams: the feed and 3 sessions)", polled)
	}
}
