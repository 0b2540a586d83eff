package front

import (
	"errors"
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
		{"empty message", nil, "", "without model_name"},
		{"no name", marshal(t, &inference.ModelInferRequest{Id: "x"}), "", "without model_name"},
		{"wrong wire type", wrongType, "", "wire type 0"},
		{"truncated", marshal(t, full)[:5], "", "model_name at byte 0"},
		{"too long", marshal(t, &inference.ModelInferRequest{ModelName: strings.Repeat("m", 256)}), "", "256 bytes, want 1..255"},
		{"bad tag", []byte{0xff}, "", "bad tag at byte 0"},
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
	if _, err := frameModel(&frame{}); !errors.Is(err, ErrNoModelName) {
		t.Errorf("empty frame: %v, want ErrNoModelName", err)
	}
}

// FuzzModelName: never panics, and agrees with a full decode whenever that succeeds with a name.
func FuzzModelName(f *testing.F) {
	f.Add(marshal(f, &inference.ModelInferRequest{ModelName: "m", Id: "i"}))
	f.Add([]byte{0x0a, 0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := modelName(b)
		var req inference.ModelInferRequest
		if proto.Unmarshal(b, &req) != nil || err != nil {
			return
		}
		// A full decode keeps the last field 1, modelName the first; they agree when there is one.
		if n := countField1(b); n == 1 && got != req.GetModelName() {
			t.Errorf("modelName = %q, proto.Unmarshal = %q", got, req.GetModelName())
		}
	})
}

func countField1(b []byte) int {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return -1
		}
		m := protowire.ConsumeFieldValue(num, typ, b[l:])
		if m < 0 {
			return -1
		}
		if num == 1 {
			n++
		}
		b = b[l+m:]
	}
	return n
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
