package tfstate

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// chunkReader reads chunks one after the other and knows which chunk the
// last byte came from. It is an io.ByteReader, so gzip reads it without a
// buffer of its own and a decompression error is found in the chunk that
// holds the bad bytes (or, for a checksum, at the end).
type chunkReader struct {
	chunks  [][]byte
	current int // the chunk of the last byte read
	next    int // the chunk to read from
	off     int // in chunks[next]
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for r.next < len(r.chunks) && r.off == len(r.chunks[r.next]) {
		r.next, r.off = r.next+1, 0
	}
	if r.next == len(r.chunks) {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[r.next][r.off:])
	r.off += n
	r.current = r.next
	return n, nil
}

func (r *chunkReader) ReadByte() (byte, error) {
	var b [1]byte
	if _, err := r.Read(b[:]); err != nil {
		return 0, err
	}
	return b[0], nil
}

// corrupt is err, from decompressing, as an ErrCorrupt naming the chunk.
func (r *chunkReader) corrupt(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: chunk-%d: the state does not decompress: %w", ErrCorrupt, r.current, err)
}

// stateReader is the decompressed state; its errors name the chunk.
type stateReader struct {
	zr *gzip.Reader
	cr *chunkReader
}

func (s *stateReader) Read(p []byte) (int, error) {
	n, err := s.zr.Read(p)
	if err != nil && err != io.EOF {
		err = s.cr.corrupt(err)
	}
	return n, err
}
