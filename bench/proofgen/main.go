// Command proofgen is the fetcher bench/proof-bench.sh plays: it holds a proof key (derived
// from a seed, so both of its modes agree on it), serves an agent card that advertises the
// key, so that a minter binds the handle it mints for it, and writes DPoP proofs of that key,
// one per line, each with a fresh jti, for wrk to send one per request.
//
// Usage:
//
//	proofgen card -seed HEX [-listen 127.0.0.1:0]     serve the card until killed; prints http://ADDR
//	proofgen proofs -seed HEX -url URL -n N           write N proofs for GET URL, issued now
//
// It listens on loopback addresses only.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/domain/proof"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "proofgen:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("give a mode: card or proofs")
	}
	flags := flag.NewFlagSet(args[0], flag.ContinueOnError)
	seedHex := flags.String("seed", "", "the proof key's seed, 64 hex digits")
	listen := flags.String("listen", "127.0.0.1:0", "card: the loopback address to serve the card on")
	url := flags.String("url", "", "proofs: the absolute URL the proofs are for (htu)")
	n := flags.Int("n", 0, "proofs: how many to write")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	seed, err := hex.DecodeString(*seedHex)
	if err != nil || len(seed) != 32 {
		return errors.New("-seed must be 64 hex digits")
	}
	prover, err := dpop.NewProver(keys.NewFixedProofKey([32]byte(seed)))
	if err != nil {
		return err
	}
	switch args[0] {
	case "card":
		return serveCard(*listen, prover.PublicKey())
	case "proofs":
		if *url == "" || *n <= 0 {
			return errors.New("proofs needs -url and -n")
		}
		return writeProofs(prover, *url, *n)
	}
	return fmt.Errorf("unknown mode %q: card or proofs", args[0])
}

// serveCard serves an agent card named bench-fetcher whose url is its own address and whose
// peer-plane extension advertises key.
func serveCard(listen string, key []byte) error {
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return errors.New("-listen must be a loopback address")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	base := "http://localhost:" + fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	card, err := json.Marshal(map[string]any{
		"name": "bench-fetcher", "url": base, "version": "1", "protocolVersion": "0.3.0",
		"capabilities": map[string]any{"extensions": []any{map[string]any{
			"uri": proof.ExtensionURI, "required": false, "params": map[string]any{"proof_key": proof.JWKOf(key)},
		}}},
	})
	if err != nil {
		return err
	}
	fmt.Println(base)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(card)
	})}
	return srv.Serve(ln)
}

// writeProofs writes n proofs for GET url, issued now, one per line on stdout.
func writeProofs(prover *dpop.Prover, url string, n int) error {
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	now := time.Now()
	for range n {
		p, err := prover.Prove(http.MethodGet, url, now)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, p); err != nil {
			return err
		}
	}
	return out.Flush()
}
