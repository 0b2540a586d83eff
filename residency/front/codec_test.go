package front

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/inferscale/inferscale/proto/inference"
)

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestModelName(t *testing.T) {
	full := &inference.ModelInferRequest{ModelName: "resnet50", ModelVersion: "3", Id: "x",
		Inputs:           []*inference.ModelInferRequest_InferInputTensor{{Name: "in", Datatype: "FP32", Shape: []int64{1, 3}}},
		RawInputContents: [][]byte{make([]byte, 12)}}
	// Field 1 written after others: legal protobuf, read all the same.
	late := protowire.AppendTag(nil, 3, protowire.BytesType)
	late = protowire.AppendString(late, "id")
	late = protowire.AppendTag(late, 1, protowire.BytesType)
	late = protowire.AppendString(late, "late")
	// Two names: a protobuf decoder keeps the last, and so Triton runs it; so does the front.
	twice := protowire.AppendTag(nil, 1, protowire.BytesType)
	twice = protowire.AppendString(twice, "first")
	twice = protowire.AppendTag(twice, 3, protowire.BytesType)
	twice = protowire.AppendString(twice, "id")
	twice = protowire.AppendTag(twice, 1, protowire.BytesType)
	twice = protowire.AppendString(twice, "second")
	emptyLast := protowire.AppendTag(nil, 1, protowire.BytesType)
	emptyLast = protowire.AppendString(emptyLast, "first")
	emptyLast = protowire.AppendTag(emptyLast, 1, protowire.BytesType)
	emptyLast = protowire.AppendString(emptyLast, "")
	wrongType := protowire.AppendTag(nil, 1, protowire.VarintType)
	wrongType = protowire.AppendVarint(wrongType, 7)
	tests := []struct {
		name    string
		give    []byte
		want    string
		wantErr string
	}{
		{"full request", marshal(t, full), "resnet50", ""},
		{"name only", marshal(t, &inference.ModelInferRequest{ModelName: "a"}), "a", ""},
		{"field 1 last", late, "late", ""},
		{"field 1 twice: the last wins", twice, "second", ""},
		{"field 1 twice, the last empty", emptyLast, "", "0 bytes, want 1..255"},
		{"truncated after the name", append(marshal(t, &inference.ModelInferRequest{ModelName: "a"}), 0x1a, 0x05, 'x'), "", "field 3 at byte 3: unexpected EOF"},
		{"empty message", nil, "", "without model_name"},
		{"no name", marshal(t, &inference.ModelInferRequest{Id: "x"}), "", "without model_name"},
		{"wrong wire type", wrongType, "", "wire type 0"},
		{"truncated", marshal(t, full)[:5], "", "model_name at byte 0"},
		{"too long", marshal(t, &inference.ModelInferRequest{ModelName: strings.Repeat("m", 256)}), "", "256 bytes, want 1..255"},
		{"bad tag", []byte{0xff}, "", "bad tag at byte 0"},
		// A group (field 2, proto2's wire types 3 and 4) between names is skipped whole: the
		// last name wins, as proto.Unmarshal reads it.
		{"group between names", []byte{0x0a, 0x01, 'a', 0x13, 0x0a, 0x01, 'b', 0x14, 0x0a, 0x01, 'c'}, "c", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := modelName(tt.give)
			if got != tt.want {
				t.Errorf("name = %q, want %q", got, tt.want)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestFrameModelSplit: a message that arrived in several buffers is read whole when its first
// buffer ends before the name does.
func TestFrameModelSplit(t *testing.T) {
	b := marshal(t, &inference.ModelInferRequest{ModelName: "split-model", Id: "1"})
	f := &frame{data: mem.BufferSlice{mem.SliceBuffer(b[:4]), mem.SliceBuffer(b[4:])}}
	if got, err := frameModel(f); got != "split-model" || err != nil {
		t.Errorf("frameModel = %q, %v; want split-model", got, err)
	}
	// A group read from a split message (the whole-message fallback).
	g := []byte{0x0a, 0x01, 'a', 0x13, 0x0a, 0x01, 'b', 0x14, 0x0a, 0x01, 'c'}
	f = &frame{data: mem.BufferSlice{mem.SliceBuffer(g[:2]), mem.SliceBuffer(g[2:])}}
	if got, err := frameModel(f); got != "c" || err != nil {
		t.Errorf("frameModel(group, split) = %q, %v; want c", got, err)
	}
	if _, err := frameModel(&frame{}); !errors.Is(err, ErrNoModelName) {
		t.Errorf("empty frame: %v, want ErrNoModelName", err)
	}
}

// TestFrameModelEverySplit: a message split into two or three buffers at every pair of offsets
// reads as the whole message does (name, or the same error), without a copy of the message.
func TestFrameModelEverySplit(t *testing.T) {
	full := marshal(t, &inference.ModelInferRequest{ModelName: "resnet50", ModelVersion: "3", Id: "x",
		Inputs:           []*inference.ModelInferRequest_InferInputTensor{{Name: "in", Datatype: "FP32", Shape: []int64{1, 3}}},
		RawInputContents: [][]byte{make([]byte, 300)}})
	full = protowire.AppendTag(full, 1, protowire.BytesType) // a second name, last: it wins
	full = protowire.AppendString(full, "bert")
	for _, msg := range [][]byte{full, full[:len(full)-3], full[:40]} {
		want, wantErr := modelName(msg)
		for i := 0; i <= len(msg); i++ {
			for j := i; j <= len(msg); j += 7 {
				f := &frame{data: mem.BufferSlice{mem.SliceBuffer(msg[:i]), mem.SliceBuffer(msg[i:j]), mem.SliceBuffer(msg[j:])}}
				got, err := frameModel(f)
				if got != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Fatalf("split at %d, %d of %d: %q, %v; want %q, %v", i, j, len(msg), got, err, want, wantErr)
				}
			}
		}
	}
	if got, err := modelName(full); got != "bert" || err != nil {
		t.Errorf("modelName = %q, %v; want bert (the last name)", got, err)
	}
}

// FuzzModelName: never panics; agrees with a full decode (the last field 1) whenever both read a
// name; and reads a message split into three buffers as it reads it whole.
func FuzzModelName(f *testing.F) {
	f.Add(marshal(f, &inference.ModelInferRequest{ModelName: "m", Id: "i"}), uint16(1), uint16(3))
	f.Add([]byte{0x0a, 0x80}, uint16(1), uint16(1))
	f.Add([]byte{}, uint16(0), uint16(0))
	f.Add([]byte{0x0a, 0x01, 'a', 0x13, 0x0a, 0x01, 'b', 0x14, 0x0a, 0x01, 'c'}, uint16(4), uint16(8)) // a group between names
	f.Fuzz(func(t *testing.T, b []byte, i, j uint16) {
		got, err := modelName(b)
		x, y := min(int(i), len(b)), min(int(j), len(b))
		if x > y {
			x, y = y, x
		}
		split, serr := frameModel(&frame{data: mem.BufferSlice{mem.SliceBuffer(b[:x]), mem.SliceBuffer(b[x:y]), mem.SliceBuffer(b[y:])}})
		if split != got || fmt.Sprint(serr) != fmt.Sprint(err) {
			t.Errorf("split at %d, %d: %q, %v; whole: %q, %v", x, y, split, serr, got, err)
		}
		var req inference.ModelInferRequest
		if proto.Unmarshal(b, &req) != nil || err != nil {
			return
		}
		if got != req.GetModelName() {
			t.Errorf("modelName = %q, proto.Unmarshal = %q", got, req.GetModelName())
		}
	})
}

// TestRawCodecRoundTrip: a frame passes through Unmarshal and Marshal as the same bytes, and
// other types are refused with an error naming them.
func TestRawCodecRoundTrip(t *testing.T) {
	in := mem.BufferSlice{mem.SliceBuffer([]byte("abc")), mem.SliceBuffer([]byte("de"))}
	var f frame
	if err := (rawCodec{}).Unmarshal(in, &f); err != nil {
		t.Fatal(err)
	}
	out, err := rawCodec{}.Marshal(&f)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Materialize()); got != "abcde" {
		t.Errorf("round trip = %q, want abcde", got)
	}
	if f.data != nil {
		t.Error("Marshal kept the reference it handed over")
	}
	if _, err := (rawCodec{}).Marshal("x"); err == nil || !strings.Contains(err.Error(), "string") {
		t.Errorf("Marshal(string): %v, want an error naming string", err)
	}
	if err := (rawCodec{}).Unmarshal(in, new(int)); err == nil || !strings.Contains(err.Error(), "*int") {
		t.Errorf("Unmarshal(*int): %v, want an error naming *int", err)
	}
}

// BenchmarkFrameModel: the model name of a 4 MiB request (two tensors) received in 16 KiB
// buffers, read across the buffers (every field's header, the name last-wins), against
// Materialize, the copy of the whole message it avoids.
func BenchmarkFrameModel(b *testing.B) {
	msg := marshal(b, &inference.ModelInferRequest{ModelName: "resnet50", Id: "x",
		Inputs:           []*inference.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "FP32", Shape: []int64{1 << 19}}, {Name: "b", Datatype: "FP32", Shape: []int64{1 << 19}}},
		RawInputContents: [][]byte{make([]byte, 2<<20), make([]byte, 2<<20)}})
	var data mem.BufferSlice
	for off := 0; off < len(msg); off += 16 << 10 {
		data = append(data, mem.SliceBuffer(msg[off:min(off+16<<10, len(msg))]))
	}
	f := &frame{data: data}
	b.Run("frameModel", func(b *testing.B) {
		for b.Loop() {
			if name, err := frameModel(f); name != "resnet50" || err != nil {
				b.Fatal(name, err)
			}
		}
	})
	b.Run("materialize", func(b *testing.B) {
		for b.Loop() {
			_ = data.Materialize()
		}
	})
}

// BenchmarkFrameModelOneBuffer: the common case, a request in one buffer: one allocation, the
// name's string, as before the scan read every field.
func BenchmarkFrameModelOneBuffer(b *testing.B) {
	msg := marshal(b, &inference.ModelInferRequest{ModelName: "resnet50", Id: "x", RawInputContents: [][]byte{make([]byte, 4096)}})
	f := &frame{data: mem.BufferSlice{mem.SliceBuffer(msg)}}
	b.ReportAllocs()
	for b.Loop() {
		if name, err := frameModel(f); name != "resnet50" || err != nil {
			b.Fatal(name, err)
		}
	}
}
