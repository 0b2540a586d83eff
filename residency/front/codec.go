package front

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// frame is one gRPC message as the bytes gRPC received it in, never decoded. The front holds
// one reference to data until it passes the frame on (Marshal hands that reference to gRPC,
// which frees it once written) or frees it.
type frame struct {
	data mem.BufferSlice
	// onSend, when set, is called once when gRPC marshals the frame to send it: the call's
	// stream exists and the message is on its way.
	onSend func()
}

func (f *frame) free() {
	f.data.Free()
	f.data = nil
}

// rawCodec is a pass-through encoding.CodecV2: Unmarshal keeps a reference to the received
// buffers and Marshal returns them, so a forwarded message is neither decoded nor copied. Its
// name is "proto" so that the content-type stays application/grpc+proto.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("front: raw codec cannot marshal %T", v)
	}
	d := f.data
	f.data = nil // the reference passes to gRPC
	if f.onSend != nil {
		f.onSend()
		f.onSend = nil
	}
	return d, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("front: raw codec cannot unmarshal into %T", v)
	}
	data.Ref()
	f.data = data
	return nil
}

// ErrNoModelName is returned by modelName for a message without a model_name field.
var ErrNoModelName = errors.New("ModelInferRequest without model_name (field 1)")

// maxModelNameBytes bounds the model name the front reads; Triton's names are directory names
// (255 bytes on common file systems).
const maxModelNameBytes = 255

// modelName reads field 1 (model_name, a string) of a serialized ModelInferRequest without
// decoding the rest: every other field is skipped by its length, and the last field 1 wins, as
// a protobuf decoder keeps the last value of a singular field — so the front gates on the
// model Triton will run. Errors name the offset.
func modelName(b []byte) (string, error) { return modelNameIn([][]byte{b}) }

// frameModel reads the model name of a frame as modelName does, across the buffers gRPC
// received it in, without copying the message.
func frameModel(f *frame) (string, error) {
	var small [4][]byte // most messages arrive in one buffer: no allocation for the list
	bufs := small[:0]
	if len(f.data) > len(small) {
		bufs = make([][]byte, 0, len(f.data))
	}
	for _, d := range f.data {
		bufs = append(bufs, d.ReadOnlyData())
	}
	name, err := modelNameIn(bufs)
	if errors.Is(err, errGroup) { // a group field (proto2's, never in this message) is skipped whole
		return modelNameContiguous(f.data.Materialize())
	}
	return name, err
}

// errGroup: the scan met a group field, which only a contiguous message can skip.
var errGroup = errors.New("group field")

// modelNameIn scans a message held in bufs, in order, for its last field 1.
func modelNameIn(bufs [][]byte) (string, error) {
	c := cursor{bufs: bufs}
	for _, b := range bufs {
		c.size += len(b)
	}
	var scratch [2 * binary.MaxVarintLen64]byte
	var name []byte
	found := false
	for !c.done() {
		off := c.pos
		p := c.peek(scratch[:])
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return "", fmt.Errorf("ModelInferRequest: bad tag at byte %d: %w", off, protowire.ParseError(n))
		}
		var skip int
		switch typ {
		case protowire.BytesType:
			l, m := protowire.ConsumeVarint(p[n:])
			if m < 0 || l > uint64(c.left()-n-m) {
				field := fmt.Sprintf("field %d", num)
				if num == 1 {
					field = "model_name"
				}
				err := io.ErrUnexpectedEOF
				if m < 0 {
					err = protowire.ParseError(m)
				}
				return "", fmt.Errorf("ModelInferRequest: %s at byte %d: %w", field, off, err)
			}
			if num == 1 {
				if l > maxModelNameBytes { // refused at once: never copied, whatever follows
					return "", fmt.Errorf("ModelInferRequest: model_name is %d bytes, want 1..%d", l, maxModelNameBytes)
				}
				c.advance(n + m)
				name, found = c.read(int(l)), true // an empty one is refused below if it is the last
				continue
			}
			skip = n + m + int(l)
		case protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type:
			if num == 1 {
				return "", fmt.Errorf("ModelInferRequest: model_name (field 1) has wire type %d, want %d (length-delimited)", typ, protowire.BytesType)
			}
			m := protowire.ConsumeFieldValue(num, typ, p[n:])
			if m < 0 {
				return "", fmt.Errorf("ModelInferRequest: field %d at byte %d: %w", num, off, protowire.ParseError(m))
			}
			skip = n + m
		case protowire.StartGroupType:
			if num == 1 {
				return "", fmt.Errorf("ModelInferRequest: model_name (field 1) has wire type %d, want %d (length-delimited)", typ, protowire.BytesType)
			}
			if len(bufs) > 1 {
				return "", errGroup
			}
			m := protowire.ConsumeFieldValue(num, typ, c.rest()[n:]) // the group after its tag
			if m < 0 {
				return "", fmt.Errorf("ModelInferRequest: field %d at byte %d: %w", num, off, protowire.ParseError(m))
			}
			skip = n + m
		default: // an end group without its start, or a reserved wire type
			return "", fmt.Errorf("ModelInferRequest: field %d at byte %d: %w", num, off, protowire.ParseError(protowire.ConsumeFieldValue(num, typ, p[n:])))
		}
		if !c.advance(skip) {
			return "", fmt.Errorf("ModelInferRequest: field %d at byte %d: %w", num, off, io.ErrUnexpectedEOF)
		}
	}
	switch {
	case !found:
		return "", ErrNoModelName
	case len(name) == 0:
		return "", fmt.Errorf("ModelInferRequest: model_name is 0 bytes, want 1..%d", maxModelNameBytes)
	}
	return string(name), nil
}

// modelNameContiguous is modelNameIn on one buffer (a copy of a split message with a group).
func modelNameContiguous(b []byte) (string, error) { return modelNameIn([][]byte{b}) }

// cursor walks a message held in several buffers without copying it.
type cursor struct {
	bufs [][]byte
	i    int // the buffer the cursor is in
	off  int // its offset there
	pos  int // its offset in the message
	size int // the message's length
}

// done reports whether the cursor is at the message's end.
func (c *cursor) done() bool {
	for c.i < len(c.bufs) && c.off >= len(c.bufs[c.i]) {
		c.i, c.off = c.i+1, 0
	}
	return c.i >= len(c.bufs)
}

// left is the bytes from the cursor to the message's end.
func (c *cursor) left() int { return c.size - c.pos }

// peek returns the next bytes, at most len(scratch): a slice of the current buffer when they
// lie in it, else a copy into scratch.
func (c *cursor) peek(scratch []byte) []byte {
	if c.done() {
		return nil
	}
	if b := c.bufs[c.i][c.off:]; len(b) >= len(scratch) || c.i == len(c.bufs)-1 {
		return b[:min(len(b), len(scratch))]
	}
	n := 0
	for j, off := c.i, c.off; j < len(c.bufs) && n < len(scratch); j, off = j+1, 0 {
		n += copy(scratch[n:], c.bufs[j][off:])
	}
	return scratch[:n]
}

// advance moves the cursor n bytes on; false when the message ends first.
func (c *cursor) advance(n int) bool {
	for n > 0 {
		if c.done() {
			return false
		}
		k := min(n, len(c.bufs[c.i])-c.off)
		c.off, c.pos, n = c.off+k, c.pos+k, n-k
	}
	return true
}

// read returns the next n bytes (n ≤ left) and moves past them: a slice of the current buffer
// when they lie in it (valid while the buffers are), else a copy.
func (c *cursor) read(n int) []byte {
	if !c.done() && len(c.bufs[c.i])-c.off >= n {
		out := c.bufs[c.i][c.off : c.off+n]
		c.off, c.pos = c.off+n, c.pos+n
		return out
	}
	out := make([]byte, 0, n)
	for len(out) < n && !c.done() {
		k := min(n-len(out), len(c.bufs[c.i])-c.off)
		out = append(out, c.bufs[c.i][c.off:c.off+k]...)
		c.off, c.pos = c.off+k, c.pos+k
	}
	return out
}

// rest is the current buffer from the cursor on (the whole remaining message when it is the
// only buffer).
func (c *cursor) rest() []byte {
	if c.done() {
		return nil
	}
	return c.bufs[c.i][c.off:]
}
