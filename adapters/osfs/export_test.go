package osfs

// UsePartFiles makes in stage .part files, as it does where the filesystem refuses unnamed
// files, so that the tests cover that scheme on any filesystem.
func UsePartFiles(in *Inbox) { in.named.Store(true) }
