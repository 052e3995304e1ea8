package limits

import "net/netip"

// ClientKey is the client address a request's share of a shared budget (the spool) is counted
// against, from its RemoteAddr: the key the per-address connection cap counts by (an IPv4
// address, an IPv6 address's /64), or "" for a loopback client or an address that does not
// parse, which cannot be told apart from other local clients.
func ClientKey(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return ""
	}
	addr := ap.Addr().Unmap()
	if addr.IsLoopback() {
		return ""
	}
	return addressKey(addr).String()
}
