package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var t0 = time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)

func testConfig() Config {
	return Config{
		Repository: "ghcr.io/inferscale", Tag: "0.1.0", Source: "https://github.com/inferscale/inferscale",
		Revision: "91919e0", Created: t0,
		Files:   map[string][]byte{"/usr/share/doc/inferscale/LICENSE": []byte("Apache License\n")},
		CACerts: []byte("-----BEGIN CERTIFICATE-----\n"),
	}
}

var scalerImage = Image{Name: "scaler", Package: "./cmd/scaler", Description: "test"}

type tarEntry struct {
	Name     string
	Mode     int64
	UID, GID int
	Dir      bool
	Data     string
	ModTime  time.Time
}

func readTar(t *testing.T, r io.Reader) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{Name: h.Name, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Dir: h.Typeflag == tar.TypeDir, Data: string(b), ModTime: h.ModTime.UTC()})
	}
}

func TestLayer(t *testing.T) {
	b, err := Layer(scalerImage, []byte("\x7fELF"), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	d := func(name string, mode int64) tarEntry {
		return tarEntry{Name: name, Mode: mode, Dir: true, ModTime: t0}
	}
	f := func(name string, mode int64, data string) tarEntry {
		return tarEntry{Name: name, Mode: mode, Data: data, ModTime: t0}
	}
	home := d("home/nonroot/", 0o700)
	home.UID, home.GID = 65532, 65532
	want := []tarEntry{
		d("etc/", 0o755),
		f("etc/group", 0o644, group),
		f("etc/nsswitch.conf", 0o644, "hosts: files dns\n"),
		f("etc/passwd", 0o644, passwd),
		d("etc/ssl/", 0o755),
		d("etc/ssl/certs/", 0o755),
		f("etc/ssl/certs/ca-certificates.crt", 0o644, "-----BEGIN CERTIFICATE-----\n"),
		d("home/", 0o755),
		home,
		d("tmp/", 0o1777),
		d("usr/", 0o755),
		d("usr/local/", 0o755),
		d("usr/local/bin/", 0o755),
		f("usr/local/bin/scaler", 0o755, "\x7fELF"),
		d("usr/share/", 0o755),
		d("usr/share/doc/", 0o755),
		d("usr/share/doc/inferscale/", 0o755),
		f("usr/share/doc/inferscale/LICENSE", 0o644, "Apache License\n"),
	}
	if diff := cmp.Diff(want, readTar(t, bytes.NewReader(b))); diff != "" {
		t.Errorf("layer entries (-want +got)\n%s", diff)
	}
	again, _ := Layer(scalerImage, []byte("\x7fELF"), testConfig())
	if !bytes.Equal(b, again) {
		t.Error("two layers of the same inputs differ: not reproducible")
	}
}

func TestPlatformImageConfig(t *testing.T) {
	c := testConfig()
	lt, err := Layer(scalerImage, []byte("bin"), c)
	if err != nil {
		t.Fatal(err)
	}
	img, err := PlatformImage(scalerImage, Platform{OS: "linux", Arch: "arm64"}, lt, c)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/usr/local/bin/scaler"}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got)\n%s", diff)
	}
	got := map[string]string{"user": cf.Config.User, "os": cf.OS, "arch": cf.Architecture, "created": cf.Created.UTC().Format(time.RFC3339),
		"licenses": cf.Config.Labels["org.opencontainers.image.licenses"], "revision": cf.Config.Labels["org.opencontainers.image.revision"],
		"source": cf.Config.Labels["org.opencontainers.image.source"]}
	want := map[string]string{"user": "65532:65532", "os": "linux", "arch": "arm64", "created": "2026-12-01T07:00:00Z",
		"licenses": "Apache-2.0", "revision": "91919e0", "source": "https://github.com/inferscale/inferscale"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got)\n%s", diff)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest media types: %s, config %s, layers %+v; want OCI throughout, one layer", m.MediaType, m.Config.MediaType, m.Layers)
	}
	if m.Annotations["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("manifest annotations %v: want the OCI labels", m.Annotations)
	}
	if len(cf.RootFS.DiffIDs) != 1 {
		t.Errorf("rootfs diff_ids %v: want one", cf.RootFS.DiffIDs)
	}
}

func TestValidateAndPlatforms(t *testing.T) {
	bad := Config{Repository: "GHCR.io/x:latest", Tag: "-x", Files: map[string][]byte{"rel/path": nil}}
	err := bad.Validate()
	for _, want := range []string{"Repository", "Tag", "Source", "Created", "Files"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%+v) = %v: want an error naming %s", bad, err, want)
		}
	}
	if err := testConfig().Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	got, err := ParsePlatforms("linux/amd64, linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultPlatforms, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	for _, s := range []string{"", "darwin/arm64", "linux/amd64,linux/amd64", "linux/mips99"} {
		if _, err := ParsePlatforms(s); err == nil {
			t.Errorf("ParsePlatforms(%q): no error", s)
		}
	}
}

// untar unpacks an archive into dir, refusing paths that leave it; as root it keeps owners.
func untar(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("archive entry %q leaves the root", h.Name)
		}
		mode := os.FileMode(h.Mode & 0o777)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, mode); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("archive entry %q: type %c; the images hold only files and directories", h.Name, h.Typeflag)
		}
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// imageFromArchive reads an archive WriteArchive wrote and returns its reference annotation
// and the image for arch.
func imageFromArchive(t *testing.T, archive, arch string) (string, v1.Image, *v1.IndexManifest) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	untar(t, f, dir)
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("index.json %+v: want one OCI image index", tm.Manifests)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return tm.Manifests[0].Annotations["io.containerd.image.name"], img, im
		}
	}
	t.Fatalf("%s: no image for %s in %+v", archive, arch, im.Manifests)
	return "", nil, nil
}

func TestWriteArchiveRoundTrip(t *testing.T) {
	c := testConfig()
	var imgs []v1.Image
	for _, p := range DefaultPlatforms {
		lt, err := Layer(scalerImage, []byte("bin-"+p.Arch), c)
		if err != nil {
			t.Fatal(err)
		}
		img, err := PlatformImage(scalerImage, p, lt, c)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	idx, err := Index(scalerImage, imgs, DefaultPlatforms, c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "scaler.tar")
	if err := WriteArchive(out, idx, c.Ref("scaler"), c.Tag, c.Created); err != nil {
		t.Fatal(err)
	}
	ref, img, im := imageFromArchive(t, out, "arm64")
	if ref != "ghcr.io/inferscale/scaler:0.1.0" {
		t.Errorf("reference annotation %q", ref)
	}
	var plats []string
	for _, d := range im.Manifests {
		plats = append(plats, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, plats); diff != "" {
		t.Errorf("index platforms (-want +got)\n%s", diff)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	var bin string
	for _, e := range readTar(t, rc) {
		if e.Name == "usr/local/bin/scaler" {
			bin = e.Data
		}
	}
	if bin != "bin-arm64" {
		t.Errorf("arm64 image's binary = %q, want the arm64 build", bin)
	}
	first, _ := os.ReadFile(out)
	if err := WriteArchive(out, idx, c.Ref("scaler"), c.Tag, c.Created); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(out)
	if !bytes.Equal(first, second) {
		t.Error("two archives of the same index differ: not reproducible")
	}
}

// TestImagesStart builds each image for this machine's architecture (or reads the archives
// `make images` wrote, when INFERSCALE_IMAGES_DIR names their directory), unpacks its root
// filesystem and runs the entrypoint with --version inside it (chroot), as the image's user
// 65532: an image that cannot start — a dynamically linked binary, a missing file, a user
// that cannot execute it — fails here.
func TestImagesStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for chroot(2) into the unpacked image; run as root (CI does)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("images are linux images")
	}
	dir := os.Getenv("INFERSCALE_IMAGES_DIR")
	if dir == "" {
		if testing.Short() {
			t.Skip("-short: building three static binaries takes minutes; set INFERSCALE_IMAGES_DIR=dist/images after make images")
		}
		dir = t.TempDir()
		c := testConfig()
		c.Files = map[string][]byte{}
		if _, err := BuildAll(context.Background(), "go", "../..", dir, Images, []Platform{{OS: "linux", Arch: runtime.GOARCH}}, c, t.Logf); err != nil {
			t.Fatal(err)
		}
	}
	for _, im := range Images {
		t.Run(im.Name, func(t *testing.T) {
			_, img, _ := imageFromArchive(t, filepath.Join(dir, im.Name+".tar"), runtime.GOARCH)
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			rc := mutate.Extract(img)
			untar(t, rc, root)
			rc.Close()
			if err := os.Chmod(root, 0o755); err != nil {
				t.Fatal(err)
			}
			var uid, gid uint32
			if _, err := fmt.Sscanf(cf.Config.User, "%d:%d", &uid, &gid); err != nil || uid == 0 {
				t.Fatalf("image user %q: want a non-root uid:gid", cf.Config.User)
			}
			var out bytes.Buffer
			cmd := exec.Command(cf.Config.Entrypoint[0], append(cf.Config.Entrypoint[1:], "--version")...)
			cmd.Dir = "/"
			cmd.Env = cf.Config.Env
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s --version in the unpacked image as %s: %v\n%s", cf.Config.Entrypoint[0], cf.Config.User, err, out.String())
			}
			if got := out.String(); !strings.HasPrefix(got, im.Name+" ") || !strings.Contains(got, "github.com/inferscale/inferscale") {
				t.Errorf("%s --version printed %q; want %q followed by the module path", im.Name, got, im.Name+" ")
			}
		})
	}
}

// A Created time past year 9999 cannot be written into the image config (RFC 3339); Validate
// refuses it before anything is built, instead of BuildAll failing after every compile.
func TestValidateCreatedYear(t *testing.T) {
	c := testConfig()
	c.Created = time.Unix(99999999999999, 0).UTC()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Created") {
		t.Errorf("Validate with Created %v = %v; want an error naming Created", c.Created, err)
	}
	c.Created = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	if err := c.Validate(); err != nil {
		t.Errorf("Validate with Created %v = %v; want nil", c.Created, err)
	}
}
