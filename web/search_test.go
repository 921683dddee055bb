package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserSearch: the search box of the sessions list finds an event by a word of its
// terminal output, shows the word marked in the snippet, and the result's link opens the
// session with that event's entry marked and in view, even when the event is far before the
// transcript's window (the page reads back to it). Another session's event with other words is
// not a result.
func TestBrowserSearch(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	s.create(t, "S-find")
	s.create(t, "S-other")
	var evs []string
	for i := range 1500 {
		chunk := fmt.Sprintf("line %d of the build", i)
		if i == 5 {
			chunk = "panic: needleword <b>not</b> found in billing/invoice.go"
		}
		evs = append(evs, ev("S-find", "terminal", "", "", fmt.Sprintf(`{"terminalId":"t-%d","stream":"stdout","chunk":%q}`, i, chunk)))
	}
	s.appendEvents(t, "S-find", evs[:1000]...)
	s.appendEvents(t, "S-find", evs[1000:]...)
	s.appendEvents(t, "S-other", msg("S-other", "m1", "user", "haystack only"))
	if _, err := s.srv.SearchIndexer().CatchUp(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "list", chromedp.Navigate(s.ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`form.find input[name=find]`)))
	run(t, ctx, "search", chromedp.SendKeys(chromedp.CSS(`form.find input[name=find]`), "needleword"), chromedp.Click(chromedp.CSS(`form.find button`)),
		waitJS(`document.querySelector('.search-results')?.dataset.count === '1'`))
	if got := eval[string](t, ctx, `document.querySelector('.search-results a').getAttribute('href')`); got != "#/s/S-find?seq=5" {
		t.Errorf("the result links to %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.search-results mark').textContent`); got != "needleword" {
		t.Errorf("the marked word is %q", got)
	}
	// The snippet's text is text: the <b> of the chunk is not an element.
	if n := eval[int](t, ctx, `document.querySelectorAll('.search-results .snippet b').length`); n != 0 {
		t.Errorf("the snippet made %d <b> elements out of the event's text", n)
	}
	if !strings.Contains(location(t, ctx), "find=needleword") {
		t.Errorf("the search is not in the URL: %s", location(t, ctx))
	}
	run(t, ctx, "open", chromedp.Click(chromedp.CSS(`.search-results a`)),
		waitJS(`document.querySelector('.entry.found')?.dataset.foundSeq === '5'`))
	if got := eval[string](t, ctx, `document.querySelector('.entry.found').textContent`); !strings.Contains(got, "needleword") {
		t.Errorf("the marked entry is %q", got)
	}
	if !eval[bool](t, ctx, `(() => { const r = document.querySelector('.entry.found').getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; })()`) {
		t.Error("the marked entry is not in view")
	}
}

func location(t *testing.T, ctx context.Context) string { return eval[string](t, ctx, `location.href`) }
