package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// UID and GID of the user every image runs as: 65532, "nonroot", the convention of
// distroless and ko images, so a PodSecurity "restricted" namespace admits the pods as built.
const (
	UID = 65532
	GID = 65532
)

// BinDir is where the entrypoint binary lives in every image.
const BinDir = "/usr/local/bin"

// Image is one image to build: the command it runs.
type Image struct {
	// Name is the image's name and its binary's, e.g. "scaler" (Images lists them all).
	Name string
	// Package is the Go package of the command, relative to the module root: "./cmd/scaler".
	Package string
	// Description becomes the org.opencontainers.image.description label.
	Description string
}

// Images are the images `make images` builds, in a fixed order.
var Images = []Image{
	{Name: "scaler", Package: "./cmd/scaler", Description: "inferscale KEDA external scaler"},
	{Name: "residency", Package: "./cmd/residency", Description: "inferscale residency sidecar for Triton (NVML budget needs the cgo build; this image takes the budget from --mig-profile or --budget-bytes)"},
	{Name: "tritonfake", Package: "./cmd/tritonfake", Description: "inferscale fake Triton Inference Server for tests and demos"},
	{Name: "ledger", Package: "./cmd/ledger", Description: "inferscale capacity ledger and node release audit (the chart's optional CronJob)"},
}

// Platform is one OS/architecture pair. Only linux is built.
type Platform struct {
	OS   string
	Arch string
}

// String is "os/arch".
func (p Platform) String() string { return p.OS + "/" + p.Arch }

// DefaultPlatforms are linux/amd64 and linux/arm64.
var DefaultPlatforms = []Platform{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}}

// ParsePlatforms parses "linux/amd64,linux/arm64". Each entry must be linux/<GOARCH> with an
// architecture from amd64, arm64, arm, ppc64le, s390x, riscv64, 386.
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	known := []string{"amd64", "arm64", "arm", "ppc64le", "s390x", "riscv64", "386"}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		osName, arch, ok := strings.Cut(f, "/")
		if !ok || osName != "linux" || !slices.Contains(known, arch) {
			return nil, fmt.Errorf("platform %q: want linux/<arch> with arch one of %v", f, known)
		}
		p := Platform{OS: osName, Arch: arch}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("platform %q listed twice", f)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("platforms: want at least one linux/<arch>")
	}
	return out, nil
}

// Config is what every image of one build shares.
type Config struct {
	// Repository prefixes the image name in the archive's reference annotations:
	// "ghcr.io/inferscale" gives "ghcr.io/inferscale/scaler:<Tag>".
	Repository string
	// Tag is the image tag, normally the chart's appVersion.
	Tag string
	// Source is the org.opencontainers.image.source URL.
	Source string
	// Revision is the VCS commit (org.opencontainers.image.revision); may be empty.
	Revision string
	// Created is every timestamp in the image (config, history, file mtimes): the commit time,
	// so two builds of one commit give byte-identical archives.
	Created time.Time
	// Files are extra regular files (path inside the image → content), e.g. the licence.
	Files map[string][]byte
	// CACerts is the CA bundle written to /etc/ssl/certs/ca-certificates.crt; none when nil.
	CACerts []byte
}

var (
	tagRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	repoRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*(:[0-9]{1,5})?(/[a-z0-9][a-z0-9._-]*)*$`)
)

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if !repoRE.MatchString(c.Repository) {
		errs = append(errs, fmt.Errorf("Repository %q: want a registry path such as ghcr.io/inferscale (lower case, optional :port, no tag)", c.Repository))
	}
	if !tagRE.MatchString(c.Tag) {
		errs = append(errs, fmt.Errorf("Tag %q: want 1–128 characters of [A-Za-z0-9_.-], not starting with . or -", c.Tag))
	}
	if c.Source == "" {
		errs = append(errs, errors.New("Source: want the repository URL"))
	}
	if c.Created.IsZero() {
		errs = append(errs, errors.New("Created: want the commit time (reproducible archives), not zero"))
	} else if y := c.Created.Year(); y < 1 || y > 9999 {
		// The image config's "created" is RFC 3339, four-digit years only.
		errs = append(errs, fmt.Errorf("Created (year %d): want a year in [1, 9999] (RFC 3339 timestamps)", y))
	}
	for p := range c.Files {
		if !path.IsAbs(p) || path.Clean(p) != p {
			errs = append(errs, fmt.Errorf("Files: path %q: want an absolute, clean path", p))
		}
	}
	return errors.Join(errs...)
}

// Ref is the image reference, "<Repository>/<name>:<Tag>".
func (c Config) Ref(name string) string { return c.Repository + "/" + name + ":" + c.Tag }

// Build cross-compiles pkg for p into out with CGO_ENABLED=0, -trimpath and stripped symbols,
// running goTool ("go") in dir (the module root). -buildvcs=auto stamps the VCS revision when
// dir is a git checkout (it overrides a GOFLAGS=-buildvcs=false), for --version.
func Build(ctx context.Context, goTool, dir, pkg string, p Platform, out string) error {
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-buildvcs=auto", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, p, err, b)
	}
	return nil
}

// entry is one file or directory of the image's layer.
type entry struct {
	name string // without leading slash
	mode int64
	uid  int
	dir  bool
	data []byte
}

// passwd and group name root (for files owned by 0) and nonroot; no login shell exists.
const (
	passwd   = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group    = "root:x:0:\nnonroot:x:65532:\n"
	nsswitch = "hosts: files dns\n"
)

// Layer returns the single layer of image im: binary at BinDir/<Name>, plus the common files
// of c, as an uncompressed tar with every mtime equal to c.Created. Directories come before
// their contents and entries are sorted, so the bytes depend only on the inputs.
func Layer(im Image, binary []byte, c Config) ([]byte, error) {
	entries := []entry{
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte(nsswitch)},
		{name: "home/nonroot", mode: 0o700, uid: UID, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
		{name: strings.TrimPrefix(BinDir, "/") + "/" + im.Name, mode: 0o755, data: binary},
	}
	if c.CACerts != nil {
		entries = append(entries, entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: c.CACerts})
	}
	for p, b := range c.Files {
		entries = append(entries, entry{name: strings.TrimPrefix(p, "/"), mode: 0o644, data: b})
	}
	// Parent directories, root-owned 0755, unless listed.
	have := map[string]bool{}
	for _, e := range entries {
		have[e.name] = true
	}
	for _, e := range slices.Clone(entries) {
		for d := path.Dir(e.name); d != "."; d = path.Dir(d) {
			if !have[d] {
				have[d] = true
				entries = append(entries, entry{name: d, mode: 0o755, dir: true})
			}
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: c.Created.UTC(),
			Format: tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer of %s: %s: %w", im.Name, e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer of %s: %s: %w", im.Name, e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer of %s: %w", im.Name, err)
	}
	return buf.Bytes(), nil
}

// Labels are the OCI annotation keys the images carry as config labels and manifest
// annotations (github.com/opencontainers/image-spec annotations.md).
func Labels(im Image, c Config) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       im.Name,
		"org.opencontainers.image.description": im.Description,
		"org.opencontainers.image.source":      c.Source,
		"org.opencontainers.image.url":         c.Source,
		"org.opencontainers.image.version":     c.Tag,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.vendor":      "The inferscale Authors",
		"org.opencontainers.image.created":     c.Created.UTC().Format(time.RFC3339),
	}
	if c.Revision != "" {
		l["org.opencontainers.image.revision"] = c.Revision
	}
	return l
}

// PlatformImage assembles the image of im for p from its layer (Layer's output).
func PlatformImage(im Image, p Platform, layerTar []byte, c Config) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image %s %s: layer: %w", im.Name, p, err)
	}
	created := v1.Time{Time: c.Created.UTC()}
	cf := &v1.ConfigFile{
		Architecture: p.Arch,
		OS:           p.OS,
		Created:      created,
		Config: v1.Config{
			Entrypoint: []string{BinDir + "/" + im.Name},
			User:       fmt.Sprintf("%d:%d", UID, GID),
			WorkingDir: "/home/nonroot",
			Env:        []string{"PATH=" + BinDir, "HOME=/home/nonroot"},
			Labels:     Labels(im, c),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("image %s %s: config: %w", im.Name, p, err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "make images (internal/imagebuild)", Comment: im.Package},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s %s: append layer: %w", im.Name, p, err)
	}
	return mutate.Annotations(img, Labels(im, c)).(v1.Image), nil
}

// Index puts one image per platform into an OCI image index, in the order given.
func Index(im Image, imgs []v1.Image, plats []Platform, c Config) (v1.ImageIndex, error) {
	if len(imgs) != len(plats) || len(imgs) == 0 {
		return nil, fmt.Errorf("index %s: %d images for %d platforms", im.Name, len(imgs), len(plats))
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range imgs {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: plats[i].OS, Architecture: plats[i].Arch}},
		})
	}
	return mutate.Annotations(idx, Labels(im, c)).(v1.ImageIndex), nil
}

// WriteArchive writes idx as an OCI image layout packed in a tar file at out. The layout's
// index.json names the image by its reference (org.opencontainers.image.ref.name: the tag,
// io.containerd.image.name: the full reference, as containerd and docker load expect).
func WriteArchive(out string, idx v1.ImageIndex, ref, tag string, created time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("layout for %s: %w", ref, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          ref,
	})); err != nil {
		return fmt.Errorf("layout for %s: %w", ref, err)
	}
	return tarDir(dir, out, created)
}

// tarDir packs the regular files under dir into out, sorted, with fixed owner and mtime.
func tarDir(dir, out string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, n := range names {
		if strings.HasSuffix(n, "/") {
			h := &tar.Header{Name: n, Mode: 0o755, ModTime: mtime.UTC(), Typeflag: tar.TypeDir, Format: tar.FormatPAX}
			if err := tw.WriteHeader(h); err != nil {
				f.Close()
				return err
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			f.Close()
			return err
		}
		h := &tar.Header{Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: mtime.UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// BuildAll builds every image of ims for every platform of plats and writes
// outDir/<name>.tar, returning the archive paths in the order of ims. moduleDir is the module
// root that Build runs go in; logf reports progress (may be nil).
func BuildAll(ctx context.Context, goTool, moduleDir, outDir string, ims []Image, plats []Platform, c Config, logf func(format string, args ...any)) ([]string, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	bin, err := os.MkdirTemp(outDir, ".bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)
	var out []string
	for _, im := range ims {
		var imgs []v1.Image
		for _, p := range plats {
			exe := filepath.Join(bin, im.Name+"-"+p.OS+"-"+p.Arch)
			logf("build %s for %s", im.Package, p)
			if err := Build(ctx, goTool, moduleDir, im.Package, p, exe); err != nil {
				return nil, err
			}
			b, err := os.ReadFile(exe)
			if err != nil {
				return nil, err
			}
			lt, err := Layer(im, b, c)
			if err != nil {
				return nil, err
			}
			img, err := PlatformImage(im, p, lt, c)
			if err != nil {
				return nil, err
			}
			imgs = append(imgs, img)
		}
		idx, err := Index(im, imgs, plats, c)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(outDir, im.Name+".tar")
		if err := WriteArchive(path, idx, c.Ref(im.Name), c.Tag, c.Created); err != nil {
			return nil, err
		}
		d, _ := idx.Digest()
		logf("wrote %s (%s, index %s)", path, c.Ref(im.Name), d)
		out = append(out, path)
	}
	return out, nil
}
