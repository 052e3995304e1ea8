// Package tlscert is the resource listener's TLS certificate pair (docs/operator-guide.md,
// "TLS"): the PEM certificate chain and private key given with --tls-cert and --tls-key,
// loaded at start and reloaded when either file changes, so that a certificate can be
// rotated on disk — as cert-manager or a sidecar does it — without a restart.
//
// The files are looked at on a handshake, at most once every CheckInterval: each is stat'ed
// (device, inode, size and modification time, following symlinks, so the swap of a Kubernetes
// secret volume's ..data link counts as a change), and when either differs from the last
// look the pair is loaded again. A new pair that does not load — a half-written file, a key
// that does not match its certificate — is logged once and the previous pair goes on
// serving; the pair is tried again once the files change again.
//
// Config is the server side: TLS 1.2 and later, and ALPN offering http/1.1 only, since the
// resource listener speaks HTTP/1.1 (a client that offers only h2 fails the handshake).
package tlscert

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// CheckInterval is how often, at most, a handshake looks at the files.
const CheckInterval = 10 * time.Second

// Options tune a Pair; the zero value takes the defaults.
type Options struct {
	// Interval is how often, at most, the files are looked at (default CheckInterval).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives one line per reload and one per pair that failed to load.
	Log zerolog.Logger
}

// Pair is the certificate pair in use, reloaded as the package says. It is safe for
// concurrent use.
type Pair struct {
	certPath, keyPath string
	interval          time.Duration
	now               func() time.Time
	log               zerolog.Logger
	dirs              []string

	current atomic.Pointer[tls.Certificate]
	mu      sync.Mutex // held by the one handshake that looks at the files
	checked time.Time
	seen    stamp
}

// stamp identifies what both files hold: a change to either changes it.
type stamp [2]fileStamp

type fileStamp struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

// Load loads the pair at certPath and keyPath. The error, for the operator at start, names
// what is wrong with which file.
func Load(certPath, keyPath string, o Options) (*Pair, error) {
	if o.Interval <= 0 {
		o.Interval = CheckInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Pair{certPath: certPath, keyPath: keyPath, interval: o.Interval, now: o.Now, log: o.Log}
	s, err := p.stamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("the certificate pair does not load: %w", err)
	}
	p.current.Store(&cert)
	p.seen, p.checked = s, o.Now()
	p.dirs = directoriesOf(certPath, keyPath)
	return p, nil
}

// directoriesOf lists, without repeats, the directories the pair is read from: the
// directory of each path as given, which holds whatever its entries are swapped for later,
// and the directory of the file each resolves to now, when a symlink leads elsewhere.
func directoriesOf(paths ...string) []string {
	var dirs []string
	add := func(path string) {
		if abs, err := filepath.Abs(path); err == nil && !slices.Contains(dirs, filepath.Dir(abs)) {
			dirs = append(dirs, filepath.Dir(abs))
		}
	}
	for _, path := range paths {
		add(path)
		if resolved, err := filepath.EvalSymlinks(path); err == nil {
			add(resolved)
		}
	}
	return dirs
}

// Dirs are the directories the pair is read from, which must stay readable once the process
// is confined (adapters/landlock): reloading opens the files again.
func (p *Pair) Dirs() []string { return slices.Clone(p.dirs) }

// Config is the resource listener's TLS configuration, serving this pair.
func (p *Pair) Config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: p.certificate,
	}
}

// certificate is tls.Config.GetCertificate: the pair in use, after looking at the files when
// the interval has passed. A handshake that finds another one looking does not wait for it.
func (p *Pair) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if p.mu.TryLock() {
		if now := p.now(); now.Sub(p.checked) >= p.interval {
			p.checked = now
			p.reload()
		}
		p.mu.Unlock()
	}
	return p.current.Load(), nil
}

// reload loads the pair again when the files changed since the last look; it holds p.mu.
func (p *Pair) reload() {
	s, err := p.stamp()
	if err == nil && s == p.seen {
		return
	}
	if err == nil {
		p.seen = s
		var cert tls.Certificate
		if cert, err = tls.LoadX509KeyPair(p.certPath, p.keyPath); err == nil {
			p.current.Store(&cert)
			p.log.Info().Str("cert", p.certPath).Msg("reloaded the TLS certificate pair: it changed on disk")
			return
		}
	} else {
		// A file that cannot be stat'ed is a change too, reported once.
		if p.seen == (stamp{}) {
			return
		}
		p.seen = stamp{}
	}
	p.log.Warn().Err(err).Str("cert", p.certPath).Str("key", p.keyPath).
		Msg("the TLS certificate pair changed on disk but does not load; still serving the previous pair")
}

// stamp looks at both files.
func (p *Pair) stamp() (stamp, error) {
	var s stamp
	for i, path := range []string{p.certPath, p.keyPath} {
		fi, err := os.Stat(path)
		if err != nil {
			return stamp{}, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return stamp{}, errors.New("no file status for " + path)
		}
		s[i] = fileStamp{dev: st.Dev, ino: st.Ino, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	return s, nil
}
