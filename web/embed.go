package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

//go:embed static
var static embed.FS

// asset is one file the UI serves, read once at start.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// assets are the files under static/ by their path below it ("app.js", "vendor/preact.mjs"),
// plus the generated policy.json; index is static/index.html.
var assets, index = load()

// csp is the page's Content-Security-Policy: scripts only from this origin (and the import
// map, by its hash), no inline script, event handler or style attribute, no plugins, no
// framing; images only from this origin and data: URLs (no message content makes the page
// request another origin); connections only to this origin (the API and its streams). Event content rendered by the page is
// sanitized as well: this is the second line.
var csp = func() string {
	return "default-src 'self'; script-src 'self' '" + importMapHash(index.body) + "'; style-src 'self'; " +
		"img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; " +
		"form-action 'none'; frame-ancestors 'none'"
}()

func load() (map[string]asset, asset) {
	out := map[string]asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(p, "static/")] = newAsset(b, contentType(p))
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("web: read embedded assets: %v", err))
	}
	pol, err := contract.Marshal(PolicyTable())
	if err != nil {
		panic(fmt.Sprintf("web: encode the policy table: %v", err))
	}
	out["policy.json"] = newAsset(append(pol, '\n'), "application/json")
	idx, ok := out["index.html"]
	if !ok {
		panic("web: static/index.html is not embedded")
	}
	return out, idx
}

func newAsset(b []byte, ctype string) asset {
	sum := sha256.Sum256(b)
	return asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// contentType is the media type of an asset by its extension; JavaScript modules must be
// served as text/javascript for the browser to run them.
func contentType(p string) string {
	switch ext := path.Ext(p); ext {
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".md", ".LICENSE", ".LICENSE-MPL":
		return "text/plain; charset=utf-8"
	default:
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
		return "application/octet-stream"
	}
}

// importMapHash returns the CSP source ('sha256-…') of the page's inline import map, the one
// inline script the page has.
func importMapHash(page []byte) string {
	const open, end = `<script type="importmap">`, `</script>`
	i := bytes.Index(page, []byte(open))
	if i < 0 {
		panic("web: index.html has no import map")
	}
	rest := page[i+len(open):]
	j := bytes.Index(rest, []byte(end))
	if j < 0 {
		panic("web: index.html's import map is not closed")
	}
	sum := sha256.Sum256(rest[:j])
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// ServeIndex serves the page (GET /). The page routes by the URL's fragment (#/s/ID), so
// every view of the UI is this one document.
func ServeIndex(w http.ResponseWriter, r *http.Request) {
	serve(w, r, index)
}

// ServeAsset serves GET /ui/{file...}: a file of static/ or policy.json. An unknown file is
// 404 NOT_FOUND in the API's error shape.
func ServeAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	a, ok := assets[name]
	if !ok || name == "index.html" {
		b, _ := contract.Marshal(api.ErrorBody{Error: api.Errorf(api.CodeNotFound, "no web UI file %q; the UI starts at /", name)})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusNotFound)
		w.Write(append(b, '\n'))
		return
	}
	serve(w, r, a)
}

// serve writes an asset with its ETag (a request whose If-None-Match names it gets 304) and
// the security headers. Assets are revalidated on every load (no-cache), so a new binary's
// page is never mixed with an old one's modules.
func serve(w http.ResponseWriter, r *http.Request, a asset) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", csp)
	// No ranges (a file of the UI is loaded whole): every answer is 200, or 304 when
	// If-None-Match names the ETag (weakly compared, as RFC 9110 says for If-None-Match).
	if inm := r.Header.Get("If-None-Match"); inm != "" && api.ETagListed(inm, a.etag) {
		h.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(http.StatusOK)
	w.Write(a.body) // discarded by net/http for HEAD
}
