package application

import (
	"math/bits"
	"sync"
)

// bufferPool recycles read buffers in size classes, so a steady stream of reads reuses a
// handful of buffers instead of allocating one per request. Classes are four per power of two
// (5, 6, 7 and 8 × 2^(k-2) bytes, from 4 KiB up to 64 MiB), so a buffer is at most 25% larger
// than asked for. A buffer above the largest class is allocated exactly and never pooled, so
// one huge read cannot pin memory for good.
type bufferPool struct {
	classes [classCount]sync.Pool
}

const (
	minClassShift = 12 // the smallest class, 4 KiB
	maxClassShift = 26 // the largest class, 64 MiB
	classCount    = 1 + 4*(maxClassShift-minClassShift)
)

// pooledBuffer is a buffer and the pool entry it goes back to.
type pooledBuffer struct {
	bytes []byte
	class int // -1: not pooled
}

// classFor returns the index and the capacity of the smallest class holding n bytes, or -1
// and n when n is above the largest class.
func classFor(n int) (int, int) {
	if n <= 1<<minClassShift {
		return 0, 1 << minClassShift
	}
	shift := bits.Len(uint(n-1)) - 1 // 2^shift <= n-1 < 2^(shift+1)
	quarter := shift - 2
	steps := (n - 1) >> quarter // 4..7
	index := 1 + 4*(shift-minClassShift) + steps - 4
	if index >= classCount {
		return -1, n
	}
	return index, (steps + 1) << quarter
}

// capacityFor is the memory a buffer for n bytes really occupies, which is what a read
// reserves from the budget.
func capacityFor(n int) int {
	_, capacity := classFor(n)
	return capacity
}

// get returns a buffer of length n from its class.
func (p *bufferPool) get(n int) *pooledBuffer {
	class, capacity := classFor(n)
	if class >= 0 {
		if b, ok := p.classes[class].Get().(*pooledBuffer); ok {
			b.bytes = b.bytes[:n]
			return b
		}
	}
	return &pooledBuffer{bytes: make([]byte, n, capacity), class: class}
}

// put returns b to its class; b must not be used afterwards.
func (p *bufferPool) put(b *pooledBuffer) {
	if b.class >= 0 {
		p.classes[b.class].Put(b)
	}
}
