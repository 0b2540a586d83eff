// Command images builds the project's OCI image archives (dist/images/<name>.tar) without a
// container daemon; `make images` runs it. See internal/imagebuild.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/inferscale/inferscale/internal/imagebuild"
)

func main() {
	err := run(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

// names lists the names of imagebuild.Images, the one list of images, joined by ", " and, when
// last is not "", the last one by " <last> ": "scaler, residency, tritonfake or ledger".
func names(last string) string {
	ns := make([]string, 0, len(imagebuild.Images))
	for _, im := range imagebuild.Images {
		ns = append(ns, im.Name)
	}
	if last == "" || len(ns) < 2 {
		return strings.Join(ns, ", ")
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " " + last + " " + ns[len(ns)-1]
}

// selectImages is imagebuild.Images, or only the one named only when it is not "".
func selectImages(only string) ([]imagebuild.Image, error) {
	if only == "" {
		return imagebuild.Images, nil
	}
	for _, im := range imagebuild.Images {
		if im.Name == only {
			return []imagebuild.Image{im}, nil
		}
	}
	return nil, fmt.Errorf("--only %q: want %s", only, names("or"))
}

// run builds the images args ask for; flag errors and usage go to stderr.
func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "dist/images", "directory for <name>.tar")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated linux/<arch> list")
	repo := fs.String("repository", "ghcr.io/inferscale", "registry path the image references name")
	tag := fs.String("tag", "", "image tag (the chart's appVersion)")
	source := fs.String("source", "https://github.com/inferscale/inferscale", "org.opencontainers.image.source")
	revision := fs.String("revision", "", "VCS commit for org.opencontainers.image.revision")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix seconds for every timestamp (the commit time)")
	caCerts := fs.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied into the images; empty: none")
	only := fs.String("only", "", "build only this image ("+names("")+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Before the files are read: a misspelt name is a bad flag, whatever the directory.
	ims, err := selectImages(*only)
	if err != nil {
		return err
	}
	plats, err := imagebuild.ParsePlatforms(*platforms)
	if err != nil {
		return err
	}
	sec, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || sec <= 0 {
		return fmt.Errorf("--source-date-epoch %q: want Unix seconds > 0 (make images passes the commit time)", *epoch)
	}
	c := imagebuild.Config{
		Repository: *repo, Tag: *tag, Source: *source, Revision: *revision,
		Created: time.Unix(sec, 0).UTC(), Files: map[string][]byte{},
	}
	for _, f := range []string{"LICENSE", "NOTICE"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("%s (run from the repository root): %w", f, err)
		}
		c.Files["/usr/share/doc/inferscale/"+f] = b
	}
	if *caCerts != "" {
		if c.CACerts, err = os.ReadFile(*caCerts); err != nil {
			return fmt.Errorf("--ca-certs: %w (apt-get install ca-certificates, or --ca-certs='')", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	abs, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	_, err = imagebuild.BuildAll(ctx, "go", ".", abs, ims, plats, c, log.Printf)
	return err
}
