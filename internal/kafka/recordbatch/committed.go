package recordbatch

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Aborted is one aborted transaction of a fetch response: the producer and
// the first offset the transaction wrote in the partition.
type Aborted struct {
	ProducerID  int64
	FirstOffset int64
}

// Committed keeps what a read_committed consumer of one partition would
// read, a batch at a time: it drops transaction markers and the batches of
// aborted transactions. A fetch response lists the aborted transactions
// that overlap the batches it returns; a producer's batches are dropped
// from its aborted transaction's first offset until that transaction's
// abort marker. Use one Committed per fetch response, over its batches in
// order.
type Committed struct {
	// aborting maps a producer to the first offsets of its aborted
	// transactions not ended yet, lowest first: brokers need not list them
	// in order.
	aborting map[int64][]int64
}

// NewCommitted returns the filter of a fetch response's partition.
func NewCommitted(aborted []Aborted) *Committed {
	c := &Committed{}
	if len(aborted) == 0 {
		return c
	}
	c.aborting = map[int64][]int64{}
	for _, a := range aborted {
		c.aborting[a.ProducerID] = append(c.aborting[a.ProducerID], a.FirstOffset)
	}
	for _, offsets := range c.aborting {
		slices.Sort(offsets)
	}
	return c
}

// Keep says whether a read_committed consumer would read the batch's
// records. A marker is never kept; an abort marker ends its producer's
// oldest aborted transaction. An error means a marker it cannot read (a
// compressed control batch, which brokers do not write).
func (c *Committed) Keep(b *Batch) (bool, error) {
	if b.Magic < 2 || !b.Transactional() {
		return !b.Control(), nil
	}
	offsets := c.aborting[b.ProducerID]
	if b.Control() {
		abort, err := b.abortMarker()
		if err != nil {
			return false, err
		}
		if abort && len(offsets) > 0 {
			if len(offsets) == 1 {
				delete(c.aborting, b.ProducerID)
			} else {
				c.aborting[b.ProducerID] = offsets[1:]
			}
		}
		return false, nil
	}
	return len(offsets) == 0 || b.BaseOffset < offsets[0], nil
}

// Open returns the aborted transactions not ended by the batches kept so
// far: what a response's later batches are filtered with, when they are
// handed on apart from the earlier ones.
func (c *Committed) Open() []Aborted {
	var open []Aborted
	for id, offsets := range c.aborting {
		for _, o := range offsets {
			open = append(open, Aborted{ProducerID: id, FirstOffset: o})
		}
	}
	return open
}

// abortMarker reads a control batch's first record's key: a version and a
// type, 0 for abort and 1 for commit.
func (b *Batch) abortMarker() (bool, error) {
	if b.Codec() != None {
		return false, fmt.Errorf("%w: a %s control batch at offset %d", ErrCorrupt, b.Codec(), b.BaseOffset)
	}
	rec := b.Raw[headerLen:]
	// length, attributes (1 byte), timestamp delta, offset delta, key length.
	n := 0
	next := func() (int64, bool) {
		v, k := binary.Varint(rec[n:])
		if k <= 0 {
			return 0, false
		}
		n += k
		return v, true
	}
	if _, ok := next(); !ok || n >= len(rec) {
		return false, fmt.Errorf("%w: control record at offset %d", ErrCorrupt, b.BaseOffset)
	}
	n++ // attributes
	_, ok1 := next()
	_, ok2 := next()
	keyLen, ok3 := next()
	if !ok1 || !ok2 || !ok3 || keyLen < 4 || n+4 > len(rec) {
		return false, fmt.Errorf("%w: control record key at offset %d", ErrCorrupt, b.BaseOffset)
	}
	return binary.BigEndian.Uint16(rec[n+2:]) == 0, nil
}
