package ports

// Progress shows how far a pull's downloads are. Add may be called from several goroutines
// at once.
type Progress interface {
	// Start announces the downloads to come: how many files and how many bytes in all.
	Start(files int, bytes int64)
	// Add reports that bytes more were received.
	Add(bytes int64)
	// Finish ends the display.
	Finish()
}
