package inference_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/inferscale/inferscale/proto/inference"
)

// fixtures maps each fixture's base name to the message it encodes. The
// fixtures were encoded with Triton's own .proto (see testdata/README.md or
// ../shared/triton-wire/README.md).
var fixtures = map[string]func() proto.Message{
	"repository_index_request":        func() proto.Message { return &inference.RepositoryIndexRequest{} },
	"repository_index_response":       func() proto.Message { return &inference.RepositoryIndexResponse{} },
	"repository_model_load_request":   func() proto.Message { return &inference.RepositoryModelLoadRequest{} },
	"repository_model_unload_request": func() proto.Message { return &inference.RepositoryModelUnloadRequest{} },
	"model_statistics_request":        func() proto.Message { return &inference.ModelStatisticsRequest{} },
	"model_statistics_response":       func() proto.Message { return &inference.ModelStatisticsResponse{} },
	"model_ready_request":             func() proto.Message { return &inference.ModelReadyRequest{} },
	"server_ready_response":           func() proto.Message { return &inference.ServerReadyResponse{} },
}

// requireFixtures reports whether a missing shared fixture directory is a
// failure rather than a skip.
func requireFixtures() bool { return os.Getenv("INFERSCALE_REQUIRE_FIXTURES") == "1" }

// sharedDir returns ../shared/triton-wire relative to the module root, or ""
// when it does not exist.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
	shared := filepath.Join(dir, "..", "shared", "triton-wire")
	if _, err := os.Stat(shared); err != nil {
		return ""
	}
	return shared
}

// unknownFields returns the paths of every message within m, m included,
// that holds unknown fields. A field whose number or wire type differs from
// the encoder's lands there, so an empty result means every byte was
// understood.
func unknownFields(m protoreflect.Message) []string {
	var paths []string
	var walk func(path string, m protoreflect.Message)
	walk = func(path string, m protoreflect.Message) {
		if len(m.GetUnknown()) > 0 {
			paths = append(paths, path)
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := path + "." + string(fd.Name())
			switch {
			case fd.IsMap():
				if fd.MapValue().Message() != nil {
					v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
						walk(p+"["+k.String()+"]", mv.Message())
						return true
					})
				}
			case fd.IsList():
				if fd.Message() != nil {
					for i := range v.List().Len() {
						walk(p+"["+strconv.Itoa(i)+"]", v.List().Get(i).Message())
					}
				}
			case fd.Message() != nil:
				walk(p, v.Message())
			}
			return true
		})
	}
	walk(string(m.Descriptor().Name()), m)
	return paths
}

func readFixture(t *testing.T, dir, name string) (bin, txt []byte) {
	t.Helper()
	bin, err := os.ReadFile(filepath.Join(dir, name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	txt, err = os.ReadFile(filepath.Join(dir, name+".txtpb"))
	if err != nil {
		t.Fatal(err)
	}
	return bin, txt
}

// TestFixturesAllCovered fails when a fixture has no message type here, or a
// listed fixture is missing, so a new fixture cannot go untested.
func TestFixturesAllCovered(t *testing.T) {
	bins, err := filepath.Glob(filepath.Join("testdata", "*.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bins {
		got = append(got, strings.TrimSuffix(filepath.Base(b), ".bin"))
	}
	var want []string
	for name := range fixtures {
		want = append(want, name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fixtures in testdata (-want +got):\n%s", diff)
	}
}

// TestTestdataMatchesShared checks that the copies in testdata are the shared
// fixtures byte for byte, so the CI copy cannot drift from the source.
func TestTestdataMatchesShared(t *testing.T) {
	shared := sharedDir(t)
	if shared == "" {
		if requireFixtures() {
			t.Fatal("../shared/triton-wire not found and INFERSCALE_REQUIRE_FIXTURES=1")
		}
		t.Skip("../shared/triton-wire not found; testing the copies in testdata only")
	}
	files, err := filepath.Glob(filepath.Join(shared, "*.*pb*"))
	if err != nil {
		t.Fatal(err)
	}
	bins, _ := filepath.Glob(filepath.Join(shared, "*.bin"))
	files = append(files, bins...)
	if len(bins) == 0 {
		t.Fatal("no .bin fixtures in", shared)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("testdata", filepath.Base(f)))
		if err != nil {
			t.Errorf("%s: not copied into testdata: %v", filepath.Base(f), err)
			continue
		}
		if !bytes.Equal(want, got) {
			t.Errorf("testdata/%s differs from %s", filepath.Base(f), f)
		}
	}
}

// TestConformance decodes every fixture with the generated types and checks
// it against the text form protoc printed with Triton's .proto.
func TestConformance(t *testing.T) {
	dirs := []string{"testdata"}
	if shared := sharedDir(t); shared != "" {
		dirs = append(dirs, shared)
	} else if requireFixtures() {
		t.Fatal("../shared/triton-wire not found and INFERSCALE_REQUIRE_FIXTURES=1")
	}
	for _, dir := range dirs {
		for name, newMsg := range fixtures {
			t.Run(filepath.Base(dir)+"/"+name, func(t *testing.T) {
				bin, txt := readFixture(t, dir, name)

				got := newMsg()
				if err := proto.Unmarshal(bin, got); err != nil {
					t.Fatalf("decode %s.bin: %v", name, err)
				}
				if u := unknownFields(got.ProtoReflect()); len(u) > 0 {
					t.Errorf("decoded %s.bin holds unknown fields at %v: a field number or type differs from Triton's", name, u)
				}
				want := newMsg()
				if err := prototext.Unmarshal(txt, want); err != nil {
					t.Fatalf("parse %s.txtpb: %v", name, err)
				}
				if !proto.Equal(want, got) {
					t.Errorf("%s: decoded binary differs from text\n want: %v\n  got: %v", name, want, got)
				}

				re, err := proto.MarshalOptions{Deterministic: true}.Marshal(got)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				if !bytes.Equal(bin, re) {
					t.Errorf("%s: re-encoded bytes differ from the fixture\n want %x\n  got %x", name, bin, re)
				}
				back := newMsg()
				if err := proto.Unmarshal(re, back); err != nil {
					t.Fatalf("decode re-encoded: %v", err)
				}
				if !proto.Equal(want, back) {
					t.Errorf("%s: round trip changed the message\n want: %v\n  got: %v", name, want, back)
				}
			})
		}
	}
}

// TestConformanceProtoc decodes each fixture with protoc and this
// directory's .proto and compares the text byte for byte with what protoc
// printed using Triton's .proto; then encodes the text and compares bytes.
func TestConformanceProtoc(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc not on PATH")
	}
	for name, newMsg := range fixtures {
		t.Run(name, func(t *testing.T) {
			bin, txt := readFixture(t, "testdata", name)
			typ := string(newMsg().ProtoReflect().Descriptor().FullName())

			dec := exec.Command(protoc, "--decode="+typ, "grpc_service.proto")
			dec.Stdin = bytes.NewReader(bin)
			out, err := dec.Output()
			if err != nil {
				t.Fatalf("protoc --decode: %v", exitErr(err))
			}
			if diff := cmp.Diff(string(txt), string(out)); diff != "" {
				t.Errorf("protoc --decode=%s (-want +got):\n%s", typ, diff)
			}

			enc := exec.Command(protoc, "--encode="+typ, "grpc_service.proto")
			enc.Stdin = bytes.NewReader(txt)
			out, err = enc.Output()
			if err != nil {
				t.Fatalf("protoc --encode: %v", exitErr(err))
			}
			if !bytes.Equal(bin, out) {
				t.Errorf("protoc --encode=%s:\n want %x\n  got %x", typ, bin, out)
			}
		})
	}
}

func exitErr(err error) error {
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return errors.Join(err, errors.New(string(ee.Stderr)))
	}
	return err
}

// mutatedIndexResponse returns a dynamic RepositoryIndexResponse built from
// a copy of the generated descriptor with edit applied to ModelIndex.
func mutatedIndexResponse(t *testing.T, edit func(*descriptorpb.FieldDescriptorProto)) protoreflect.Message {
	t.Helper()
	fdp := protodesc.ToFileDescriptorProto(inference.File_grpc_service_proto)
	for _, m := range fdp.GetMessageType() {
		if m.GetName() != "RepositoryIndexResponse" {
			continue
		}
		for _, f := range m.GetNestedType()[0].GetField() {
			edit(f)
		}
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dynamicpb.NewMessage(fd.Messages().ByName("RepositoryIndexResponse"))
}

// TestWrongFieldNumberIsCaught proves the checks above can fail: the index
// fixture decoded with state moved from 3 to 5 leaves unknown fields and
// differs from the text; with reason renamed the text no longer parses; and
// decoded into an unrelated message it leaves unknown fields too.
func TestWrongFieldNumberIsCaught(t *testing.T) {
	bin, txt := readFixture(t, "testdata", "repository_index_response")

	t.Run("shifted number", func(t *testing.T) {
		m := mutatedIndexResponse(t, func(f *descriptorpb.FieldDescriptorProto) {
			if f.GetName() == "state" {
				f.Number = proto.Int32(5)
			}
		})
		if err := proto.Unmarshal(bin, m.Interface()); err != nil {
			t.Fatal(err)
		}
		u := unknownFields(m)
		want := []string{"RepositoryIndexResponse.models[0]", "RepositoryIndexResponse.models[1]", "RepositoryIndexResponse.models[2]", "RepositoryIndexResponse.models[3]", "RepositoryIndexResponse.models[4]"}
		if diff := cmp.Diff(want, u); diff != "" {
			t.Errorf("unknown fields after decoding with state=5 (-want +got):\n%s", diff)
		}
		fromText := m.New()
		if err := prototext.Unmarshal(txt, fromText.Interface()); err != nil {
			t.Fatal(err)
		}
		if proto.Equal(fromText.Interface(), m.Interface()) {
			t.Error("a shifted field number decoded equal to the text form")
		}
	})
	t.Run("renamed field", func(t *testing.T) {
		m := mutatedIndexResponse(t, func(f *descriptorpb.FieldDescriptorProto) {
			if f.GetName() == "reason" {
				f.Name = proto.String("why")
				f.JsonName = proto.String("why")
			}
		})
		if err := prototext.Unmarshal(txt, m.Interface()); err == nil {
			t.Error("text with field reason parsed into a message that names it why")
		}
	})
	t.Run("other message", func(t *testing.T) {
		var m inference.ModelStatisticsResponse
		if err := proto.Unmarshal(bin, &m); err != nil {
			t.Fatal(err)
		}
		if u := unknownFields(m.ProtoReflect()); len(u) == 0 {
			t.Error("index response decoded as statistics response without unknown fields")
		}
	})
}
