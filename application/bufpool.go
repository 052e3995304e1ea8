package application

import (
	"math/bits"
	"sync"
)

// bufferPool recycles read buffers in power-of-two size classes, so a steady stream of reads
// reuses a handful of buffers instead of allocating one per request. Buffers above the largest
// class are allocated and dropped, never pooled, so one huge read cannot pin memory forever.
type bufferPool struct {
	classes [maxClassShift - minClassShift + 1]sync.Pool
}

const (
	minClassShift = 12 // 4 KiB
	maxClassShift = 26 // 64 MiB
)

// classOf returns the index of the smallest class holding n bytes, or -1 when n is above the
// largest class.
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	shift := bits.Len(uint(n - 1))
	if shift > maxClassShift {
		return -1
	}
	return shift - minClassShift
}

// get returns a buffer of length n. Its contents are unspecified.
func (p *bufferPool) get(n int) []byte {
	c := classOf(n)
	if c < 0 {
		return make([]byte, n)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<(c+minClassShift))
}

// put returns b to its class. Only buffers that get handed out (full class capacity) are kept.
func (p *bufferPool) put(b []byte) {
	c := classOf(cap(b))
	if c < 0 || cap(b) != 1<<(c+minClassShift) {
		return
	}
	b = b[:0]
	p.classes[c].Put(&b)
}
