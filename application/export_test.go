package application

import "github.com/resplane/resplane/ports"

// NewReaderSpoolingAbove is NewReader with reads of more than inMemoryUpTo bytes spooled, so
// tests and benchmarks can drive the spool path with small files and measure where
// InMemoryUpTo should be.
func NewReaderSpoolingAbove(budgets Budgets, spool ports.Spool, inMemoryUpTo int64) *Reader {
	r := NewReader(budgets, spool)
	r.inMemoryUpTo = inMemoryUpTo
	return r
}
