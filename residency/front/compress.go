package front

import (
	"compress/zlib"
	"io"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // registers "gzip", which Triton's gRPC server takes
)

// Triton's gRPC server (gRPC core) accepts messages compressed with gzip or deflate, and
// tritonclient.grpc offers both (compression_algorithm="gzip" | "deflate"); the front must too,
// or a client that works against Triton fails UNIMPLEMENTED through it. gRPC core's "deflate" is
// the zlib format (RFC 1950: zlib's deflateInit2 with 15 window bits), so it is compress/zlib's.
// The front decompresses a client's message (bounded by MaxRequestBytes after decompression, as
// grpc-go checks the decompressed size) and forwards it uncompressed on the pod's loopback;
// answers go back in the client's encoding.
func init() { encoding.RegisterCompressor(deflate{}) }

type deflate struct{}

func (deflate) Name() string { return "deflate" }

func (deflate) Compress(w io.Writer) (io.WriteCloser, error) { return zlib.NewWriter(w), nil }

func (deflate) Decompress(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }
