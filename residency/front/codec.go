package front

import (
	"errors"
	"fmt"

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
// decoding the rest: fields before it are skipped, the first field 1 wins (Go and C++
// protobuf write fields in number order, so it is the first field). Errors name the offset.
func modelName(b []byte) (string, error) {
	for off := 0; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", fmt.Errorf("ModelInferRequest: bad tag at byte %d: %w", off, protowire.ParseError(n))
		}
		if num == 1 {
			if typ != protowire.BytesType {
				return "", fmt.Errorf("ModelInferRequest: model_name (field 1) has wire type %d, want %d (length-delimited)", typ, protowire.BytesType)
			}
			v, m := protowire.ConsumeBytes(b[n:])
			if m < 0 {
				return "", fmt.Errorf("ModelInferRequest: model_name at byte %d: %w", off, protowire.ParseError(m))
			}
			if len(v) == 0 || len(v) > maxModelNameBytes {
				return "", fmt.Errorf("ModelInferRequest: model_name is %d bytes, want 1..%d", len(v), maxModelNameBytes)
			}
			return string(v), nil
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return "", fmt.Errorf("ModelInferRequest: field %d at byte %d: %w", num, off, protowire.ParseError(m))
		}
		b = b[n+m:]
		off += n + m
	}
	return "", ErrNoModelName
}

// frameModel reads the model name of a frame from its first buffer, where a name written first
// lies unless the message arrived split just there; else from a copy of the whole message.
func frameModel(f *frame) (string, error) {
	if len(f.data) == 0 {
		return "", ErrNoModelName
	}
	if name, err := modelName(f.data[0].ReadOnlyData()); err == nil || len(f.data) == 1 {
		return name, err
	}
	return modelName(f.data.Materialize())
}
