// Package imagebuild assembles the project's container images without a container daemon and
// without a base image: each image is one layer holding a static Go binary
// (CGO_ENABLED=0, cross-compiled per platform), a passwd/group pair that names the non-root
// user 65532, the host's CA bundle (for TLS to Prometheus and the API server), and the
// project's LICENSE and NOTICE. There is no shell and nothing writes to the root filesystem,
// so the images run with readOnlyRootFilesystem.
//
// The images of every platform go into one OCI image index, written as an OCI image layout
// packed into a tar archive (the format `skopeo copy oci-archive:`, `docker load` (25+),
// `ctr images import` and `kind load image-archive` read). The archive is reproducible: every
// timestamp is the commit time passed in (Config.Created), never the clock.
//
// The library is go-containerregistry (mutate, empty, layout, tarball); hack/images is the
// command `make images` runs.
package imagebuild
