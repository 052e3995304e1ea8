package httpapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync/atomic"

	"github.com/resplane/resplane/application"
)

// listingEncoder renders listings as their JSON answer (docs/http-api.md, "The listing"),
// reusing what it encoded for the previous listing: an entry whose path, size, mtime and
// sha256 are all equal to an entry of that listing is copied from its encoded JSON instead of
// being encoded again, and when every entry is equal, in the same order, the whole entries
// array is reused and only the envelope (root, mode, max_bytes, generation, containment) is
// rendered again; when that is unchanged too, the previous answer itself is returned.
// Listings are sorted by path, so the previous entries are searched with one forward cursor
// (docs/decisions/0171-a-listing-reuses-the-previous-answers-bytes.md).
//
// What this guarantees: every answer is byte for byte encodeJSON(listingBodyOf(l)), the
// reference rendering, whatever the previous listing held: an entry's JSON depends only on its
// four values, and an entry is reused only when all four are equal to the values that were
// encoded, compared against what the application layer listed (which is what decides whether a
// file is fresh: the hash cache, the racy window, the maximum age). New and changed entries,
// and the envelope, are encoded by encoding/json with HTML escaping off, as the reference is.
// Two listings may encode at once (application.MaxListings): each reads one published
// generation of the cache, which is never modified once published, and publishes its own
// whole; the last to finish wins, and neither ever sees a half-built one. An answer is never
// modified after it is returned, so one may be held by several responses at once.
//
// What it does not guarantee:
//
//   - Memory: between listings it keeps the last listing's answer (one listing's bytes), the
//     values of its entries (their strings shared with that listing) and one offset per entry,
//     outside the read budgets. An answer larger than application.BufferedUpTo, which is held
//     in the spool rather than in memory while it is sent, is not kept: the next listing is
//     encoded whole.
//   - Speed for a reordered or renamed tree: an entry whose path sorts before the cursor's is
//     encoded again even when it was listed before (its bytes are still exact).
type listingEncoder struct {
	last atomic.Pointer[encodedListing]
}

// encodedListing is one listing's answer and where each entry's JSON lies in it. It is never
// modified once published.
type encodedListing struct {
	body    []byte                   // the whole answer
	start   int                      // where the first entry begins: just past `"entries":[`
	entries []application.ListedFile // the values encoded, in answer order
	// ends[i] is where entry i's JSON ends, counted from start; entries are joined by ",".
	ends []int
}

// listingTail closes the entries array and the answer.
const listingTail = "]}"

// entryOverhead is about what an entry's JSON adds to its path and sha256: the keys, quotes
// and braces (48 bytes), two numbers of up to 19 digits, a comma; a path with characters to
// escape makes the answer's buffer grow once more.
const entryOverhead = 48 + 2*19 + 1

// encode renders l (encodeJSON(listingBodyOf(l)), reusing the previous listing's bytes where
// they are the same) and keeps the result for the next listing.
func (e *listingEncoder) encode(l *application.Listing) []byte {
	head := listingHead(l)
	prev := e.last.Load()
	var next *encodedListing
	if prev != nil && slices.Equal(prev.entries, l.Entries) {
		if bytes.Equal(prev.body[:prev.start], head) {
			return prev.body
		}
		next = prev.withHead(head)
	} else {
		next = encodeEntries(head, l.Entries, prev)
	}
	if len(next.body) <= application.BufferedUpTo {
		e.last.Store(next)
	} else {
		e.last.Store(nil) // held in the spool while it is sent, so not kept in memory either
	}
	return next.body
}

// listingHead renders l's envelope up to and including `"entries":[`, with the reference
// encoder: the answer of l without entries, less its tail.
func listingHead(l *application.Listing) []byte {
	envelope := *l
	envelope.Entries = nil
	empty := encodeJSON(listingBodyOf(&envelope))
	head, ok := bytes.CutSuffix(empty, []byte(listingTail))
	if !ok || !bytes.HasSuffix(head, []byte(`"entries":[`)) {
		// entries is the last key of listingBody, and an empty one is [].
		panic("httpapi: a listing without entries does not end in " + `"entries":[]}: ` + string(empty))
	}
	return head
}

// entry returns entry i's JSON.
func (p *encodedListing) entry(i int) []byte {
	from := 0
	if i > 0 {
		from = p.ends[i-1] + len(",")
	}
	return p.body[p.start+from : p.start+p.ends[i]]
}

// withHead returns p's entries under another envelope.
func (p *encodedListing) withHead(head []byte) *encodedListing {
	entries := p.body[p.start:]
	body := make([]byte, 0, len(head)+len(entries))
	body = append(append(body, head...), entries...)
	return &encodedListing{body: body, start: len(head), entries: p.entries, ends: p.ends}
}

// encodeEntries renders head, then entries, each copied from prev's JSON when prev holds an
// equal entry at or after its cursor (prev may be nil) and encoded otherwise, then the tail.
func encodeEntries(head []byte, entries []application.ListedFile, prev *encodedListing) *encodedListing {
	size := len(head) + len(listingTail)
	for _, f := range entries {
		size += len(f.Path) + len(f.SHA256) + entryOverhead
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.Write(head)
	next := &encodedListing{start: len(head), entries: slices.Clone(entries), ends: make([]int, len(entries))}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	var known []application.ListedFile
	if prev != nil {
		known = prev.entries
	}
	cursor := 0
	var entry listingEntry // one value for every Encode: passing its address allocates nothing
	for i, f := range entries {
		if i > 0 {
			buf.WriteByte(',')
		}
		for cursor < len(known) && known[cursor].Path < f.Path {
			cursor++
		}
		if cursor < len(known) && known[cursor] == f {
			buf.Write(prev.entry(cursor))
			cursor++
		} else {
			entry = listingEntryOf(f)
			if err := enc.Encode(&entry); err != nil {
				panic("httpapi: cannot encode a listing entry: " + err.Error())
			}
			buf.Truncate(buf.Len() - len("\n")) // the encoder ends every value with a newline
		}
		next.ends[i] = buf.Len() - next.start
	}
	buf.WriteString(listingTail)
	next.body = buf.Bytes()
	return next
}

// listingBody is the wire shape of a listing; field order is the documented key order
// (docs/http-api.md, "The listing"). encodeJSON(listingBodyOf(l)) is the reference rendering
// of a listing, which listingEncoder reproduces byte for byte.
type listingBody struct {
	Root        string         `json:"root"`
	Mode        string         `json:"mode"`
	MaxBytes    int64          `json:"max_bytes"`
	Generation  uint64         `json:"generation"`
	Containment string         `json:"containment_achieved"`
	Entries     []listingEntry `json:"entries"`
}

type listingEntry struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	MTimeMs   int64  `json:"mtime_ms"`
	SHA256    string `json:"sha256"`
}

func listingBodyOf(l *application.Listing) listingBody {
	entries := make([]listingEntry, len(l.Entries))
	for i, e := range l.Entries {
		entries[i] = listingEntryOf(e)
	}
	return listingBody{
		Root: l.Root, Mode: l.Mode, MaxBytes: l.MaxBytes, Generation: l.Generation,
		Containment: l.Containment.String(), Entries: entries,
	}
}

func listingEntryOf(e application.ListedFile) listingEntry {
	return listingEntry{Path: e.Path, SizeBytes: e.Size, MTimeMs: e.MTimeMs, SHA256: e.SHA256}
}
