package proof

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The claim rules' bounds (contract: an iat within 60 s in the past and 5 s in the future; a
// jti of 16 to 128 characters).
const (
	// MaxAge is how far before the service's clock a proof's iat may be.
	MaxAge = 60 * time.Second
	// MaxAhead is how far after the service's clock a proof's iat may be.
	MaxAhead = 5 * time.Second
	// ReplayWindow is how long a proof stays acceptable, so how long a redeem must remember
	// its jti: from MaxAge before the clock to MaxAhead after it.
	ReplayWindow = MaxAge + MaxAhead
	// MinJTI and MaxJTI bound a jti's length, in characters.
	MinJTI = 16
	MaxJTI = 128
)

// Method is the only htm accepted: a redeem is a GET.
const Method = "GET"

// The refusals of the claim rules.
var (
	errClaims = invalid("The DPoP proof's claims are not one JSON object without duplicate members.")
	errHTM    = invalid("The DPoP proof's htm must be GET, the method of a redeem.")
	errHTU    = invalid("The DPoP proof's htu must be the http or https URL of this request: its exact path, and the host and port of its Host header.")
	errIAT    = invalid("The DPoP proof's iat must be an integer number of seconds from 60 s before to 5 s after this service's clock.")
	errJTI    = invalid("The DPoP proof's jti must be a string of 16 to 128 characters.")
)

// Claims are a proof's claims (RFC 9449, section 4.2), as the signature covers them.
type Claims struct {
	JTI string
	HTM string
	HTU string
	// IAT is the issue time in Unix seconds.
	IAT int64
}

// ParseClaims reads a proof's claims: one JSON object without duplicate members, with jti,
// htm and htu strings and iat an integer (a JSON number without fraction or exponent). Other
// claims (ath, nonce) are ignored. It checks types only; Check checks the values.
func ParseClaims(raw []byte) (Claims, error) {
	members, ok := object(raw)
	if !ok {
		return Claims{}, errClaims
	}
	var c Claims
	if c.HTM, ok = stringMember(members, "htm"); !ok {
		return Claims{}, errHTM
	}
	if c.HTU, ok = stringMember(members, "htu"); !ok {
		return Claims{}, errHTU
	}
	iat, ok := integer(members["iat"])
	if !ok {
		return Claims{}, errIAT
	}
	c.IAT = iat
	if c.JTI, ok = stringMember(members, "jti"); !ok {
		return Claims{}, errJTI
	}
	return c, nil
}

// integer reads a JSON number written as an optional minus sign and decimal digits.
func integer(raw []byte) (int64, bool) {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// Target is the request a proof must have been made for.
type Target struct {
	// Method is the request's method.
	Method string
	// Path is the request target's path exactly as sent, cut at the first "?".
	Path string
	// Host is the request's Host header.
	Host string
}

// Check applies the claim rules for target at now, in this order: htm is GET (and the
// request's method); htu is an http or https URL whose path equals target's path exactly and
// whose host and port are target's Host (Matches); iat is within MaxAge before now and MaxAhead
// after it; jti has MinJTI to MaxJTI characters.
func (c Claims) Check(target Target, now time.Time) error {
	if c.HTM != Method || target.Method != Method {
		return errHTM
	}
	if !Matches(c.HTU, target) {
		return errHTU
	}
	sec := now.Unix()
	if c.IAT < sec-int64(MaxAge/time.Second) || c.IAT > sec+int64(MaxAhead/time.Second) {
		return errIAT
	}
	if n := utf8.RuneCountInString(c.JTI); n < MinJTI || n > MaxJTI {
		return errJTI
	}
	return nil
}

// Matches reports whether htu names target (RFC 9449, section 4.3, check 9): an http or https
// URL (scheme in any case) without userinfo, whose path — compared as sent, never decoded —
// equals target's Path, and whose host and port equal those of target's Host. Hosts compare
// without regard to ASCII case; a missing port on either side is the default port of htu's
// scheme, so https://capsule.example/… matches a Host of capsule.example:443. htu's query
// and fragment are ignored.
func Matches(htu string, target Target) bool {
	scheme, rest, ok := strings.Cut(htu, "://")
	var defaultPort string
	switch {
	case !ok:
		return false
	case strings.EqualFold(scheme, "http"):
		defaultPort = "80"
	case strings.EqualFold(scheme, "https"):
		defaultPort = "443"
	default:
		return false
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 || rest[end] != '/' {
		return false
	}
	authority, path := rest[:end], rest[end:]
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if path != target.Path || strings.Contains(authority, "@") {
		return false
	}
	host, port, ok := splitHostPort(authority, defaultPort)
	wantHost, wantPort, wantOK := splitHostPort(target.Host, defaultPort)
	return ok && wantOK && strings.EqualFold(host, wantHost) && port == wantPort
}

// splitHostPort splits an authority into its host (IPv6 brackets kept) and port, the port
// defaulting to defaultPort when it is absent or empty. ok is false for an empty host or a
// port that is not decimal digits.
func splitHostPort(authority, defaultPort string) (host, port string, ok bool) {
	host, port = authority, ""
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", false
		}
		host, port = authority[:end+1], authority[end+1:]
		if port != "" && port[0] != ':' {
			return "", "", false
		}
		port = strings.TrimPrefix(port, ":")
	} else if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		host, port = authority[:i], authority[i+1:]
	}
	if host == "" || strings.ContainsAny(host, ":") && !strings.HasPrefix(host, "[") {
		return "", "", false
	}
	if port == "" {
		port = defaultPort
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", "", false
	}
	return host, strconv.FormatUint(n, 10), true
}
