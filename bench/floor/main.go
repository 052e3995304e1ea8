// Command floor is the yardstick of bench/nginx-bench.sh: the least a Go net/http server can do
// to answer a read the way resplane's operator plane answers it. For GET /<name> it opens
// <root>/<name>, fstats it, reads it once, hashes it with sha256 and sends the brief's headers
// (content-type, etag, x-murmur-mtime-ms, x-murmur-generation, x-murmur-containment,
// x-murmur-export-root, content-length) with "Connection: close". It has no routing, no
// trace, no checks of the path, Host, body or size, and no budgets: it is not a service, only
// the floor resplane's cost per request is measured against (docs/benchmarks.md).
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "the address to serve on")
	root := flag.String("root", ".", "the directory whose files are served")
	flag.Parse()
	srv := &http.Server{Addr: *listen, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, filepath.Join(*root, filepath.Base(r.URL.Path)))
	})}
	log.Fatal(srv.ListenAndServe())
}

func serve(w http.ResponseWriter, path string) {
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body := make([]byte, info.Size())
	if _, err := io.ReadFull(f, body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(body)
	h := w.Header()
	h["Content-Type"] = []string{"application/octet-stream"}
	h["etag"] = []string{`"sha256:` + hex.EncodeToString(sum[:]) + `"`}
	h["x-murmur-mtime-ms"] = []string{strconv.FormatInt(info.ModTime().UnixMilli(), 10)}
	h["x-murmur-generation"] = []string{"0"}
	h["x-murmur-containment"] = []string{"advisory"}
	h["x-murmur-export-root"] = []string{"out/"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["Connection"] = []string{"close"}
	if _, err := w.Write(body); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
