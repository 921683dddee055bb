package server

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
)

// route is one endpoint of the API, as the router is built from it: what the request may
// carry is declared here, and [Server.guard] refuses anything else before the handler runs.
type route struct {
	pattern string // "METHOD /path/{wildcard}", as http.ServeMux takes it
	// access is who may call it (access.go); every route declares one.
	access access
	handle http.HandlerFunc
	// query lists the query parameters the endpoint knows; any other one is refused, so a
	// misspelt parameter (expected_sequence for expectedSequence) never weakens a request.
	query []string
	// body lists the media types the request body may have; nil for an endpoint that reads
	// no body. A request without a Content-Type is taken as the first of them.
	body []string
}

// Media types of request bodies.
var (
	jsonBody   = []string{"application/json"}
	eventsBody = []string{"application/json", "application/x-ndjson", "application/ndjson"}
)

// register builds the router from the route table.
func (s *Server) register(table []route) {
	for _, rt := range table {
		if !rt.access.declared() {
			panic("sessiond: route " + rt.pattern + " declares no access rule")
		}
		s.mux.Handle(rt.pattern, s.guard(rt))
	}
}

// guard checks what rt declares (query parameters, the ids in the path, the body's media
// type) and calls the handler only when the request passes.
func (s *Server) guard(rt route) http.Handler {
	wildcards := pathWildcards(rt.pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authorize(w, r, rt)
		if !ok {
			return
		}
		if s.authn.on {
			r = r.WithContext(withPrincipal(r.Context(), p))
		}
		if aerr := rt.checkQuery(r); aerr != nil {
			writeError(w, aerr)
			return
		}
		for _, name := range wildcards {
			if p := contract.IDProblem(r.PathValue(name)); p != "" {
				writeError(w, api.Errorf(contract.CodeMalformed, "path parameter %s %s: %s, so nothing can have it", name, quote(r.PathValue(name)), p))
				return
			}
		}
		if s.authn.on && !s.checkSession(w, r, p) {
			return
		}
		if aerr := rt.checkMediaType(r); aerr != nil {
			writeError(w, aerr)
			return
		}
		if rt.access.stream {
			ctx, done, ok := s.authn.openStream(r.Context(), p)
			if !ok {
				w.Header().Set("Retry-After", "5")
				writeError(w, api.Errorf(contract.CodeRateLimited, "%s holds its most streams at once (%d); close one, or retry after 5s", ownerName(p), s.authn.streams))
				return
			}
			defer done()
			r = r.WithContext(ctx)
		}
		if rt.body == nil {
			rt.handle(w, r)
			return
		}
		if rt.pattern == archiveUpload {
			s.withBody(w, r, s.opt.MaxArchiveBytes, false, "", rt.handle)
			return
		}
		s.withBody(w, r, s.opt.MaxBodyBytes, true, s.budgetKey(r, p), rt.handle)
	})
}

// pathWildcards returns the names of the {wildcards} of a ServeMux pattern ({$}, the end of
// the path, is not one).
func pathWildcards(pattern string) []string {
	var out []string
	for _, seg := range strings.Split(pattern, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") && seg != "{$}" {
			out = append(out, strings.TrimSuffix(strings.Trim(seg, "{}"), "..."))
		}
	}
	return out
}

// checkQuery refuses a query that does not parse, a parameter the route does not know, and a
// parameter given more than once (which one would count is a guess).
func (rt route) checkQuery(r *http.Request) *api.Error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return api.Errorf(contract.CodeMalformed, "the query string %s does not parse (%v); percent-encode its values and separate parameters with &", quote(r.URL.RawQuery), clip(err))
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names) // report the same parameter first every time
	for _, name := range names {
		if !slices.Contains(rt.query, name) {
			return api.Errorf(contract.CodeMalformed, "unknown query parameter %s on %s; %s", quote(name), rt.pattern, rt.allowedQuery(name))
		}
		if n := len(q[name]); n > 1 {
			return api.Errorf(contract.CodeMalformed, "query parameter %s is given %d times on %s; give it once", quote(name), n, rt.pattern)
		}
	}
	return nil
}

// allowedQuery says which parameters the route takes, and which one was probably meant.
func (rt route) allowedQuery(unknown string) string {
	if len(rt.query) == 0 {
		return "it takes no query parameters: remove it"
	}
	msg := "the allowed ones are: " + strings.Join(rt.query, ", ")
	for _, name := range rt.query {
		if foldName(name) == foldName(unknown) {
			return fmt.Sprintf("did you mean %s? %s", name, msg)
		}
	}
	return msg + "; remove it or use one of them"
}

// foldName folds case and drops '_' and '-', so expected_sequence matches expectedSequence.
func foldName(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
}

// checkMediaType refuses a body whose Content-Type the route does not take. A route with a
// body takes its declared media types, with no parameter but charset=utf-8; a request without
// a Content-Type is taken as the first declared type.
func (rt route) checkMediaType(r *http.Request) *api.Error {
	ct := r.Header.Get("Content-Type")
	if rt.body == nil || ct == "" || slices.Contains(rt.body, ct) {
		return nil // a declared type exactly as declared: nothing to parse (nearly every request)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return api.Errorf(contract.CodeUnsupportedMedia, "Content-Type %s does not parse (%v); %s", quote(ct), err, rt.mediaHint())
	}
	if !slices.Contains(rt.body, mt) {
		return api.Errorf(contract.CodeUnsupportedMedia, "Content-Type %s is not accepted by %s; %s", quote(mt), rt.pattern, rt.mediaHint())
	}
	for k, v := range params {
		if k != "charset" {
			return api.Errorf(contract.CodeUnsupportedMedia, "Content-Type parameter %s=%s is not accepted by %s; %s", quote(k), quote(v), rt.pattern, rt.mediaHint())
		}
		if !strings.EqualFold(v, "utf-8") {
			return api.Errorf(contract.CodeUnsupportedMedia, "charset %s is not accepted by %s: bodies are UTF-8; %s", quote(v), rt.pattern, rt.mediaHint())
		}
	}
	return nil
}

func (rt route) mediaHint() string {
	return "send Content-Type: " + strings.Join(rt.body, " or ") + " (curl --json sets application/json)"
}

// mediaType returns the media type of the request body, already checked by the guard.
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if slices.Contains(eventsBody, ct) || slices.Contains(jsonBody, ct) {
		return ct // as the guard's fast path: a declared type, no parameters
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt
}

// clip is an error's text for a message, bounded as quote bounds request data: for errors of
// parsers that repeat what they were given (encoding/json's unknown field, net/url's bad
// escape).
func clip(err error) string {
	msg := err.Error()
	if len(msg) <= 2*maxQuoted {
		return msg
	}
	cut := 2 * maxQuoted
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", msg[:cut], len(msg))
}

// maxQuoted is how much of a piece of request data an error message quotes.
const maxQuoted = 64

// quote quotes a piece of request data (a path, a header, a parameter, a field) for an error
// message: Go-quoted, its first maxQuoted bytes only (cut at a character's boundary) and its
// length when it is longer, so that no answer echoes the request unbounded. Every message
// that repeats what the client sent quotes it with quote.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}
