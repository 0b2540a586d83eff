package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// ErrUnknownFormat is returned when a file's header matches no format.
var ErrUnknownFormat = errors.New("unknown trace format")

// ErrNotRequests is returned for a file that is not a request trace.
var ErrNotRequests = errors.New("not a request trace")

// ErrEmptyFile is returned for a trace file of zero bytes.
var ErrEmptyFile = errors.New("file is empty")

// quoteHead quotes the first 80 bytes of s (%q, so binary bytes stay
// readable and short), with "…" when s is longer.
func quoteHead(s string) string {
	const n = 80
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", s[:n])
}

// looksBinary reports whether s holds a NUL byte or is not UTF-8.
func looksBinary(s string) bool {
	return strings.ContainsRune(s, 0) || !utf8.ValidString(s)
}

// DetectFormat guesses a trace's format from its CSV header line.
func DetectFormat(header string) (Format, error) {
	h := strings.TrimPrefix(strings.TrimSpace(header), "\ufeff")
	cols := map[string]bool{}
	for _, c := range strings.Split(h, ",") {
		cols[strings.TrimSpace(c)] = true
	}
	switch {
	case cols[colAzureTimestamp] && cols[colAzureContext]:
		return FormatAzureLLM, nil
	case cols[colTDCreate] && cols[colTDModel]:
		return FormatGenTD26, nil
	case cols["HashFunction"] && cols["minute_1"]:
		return FormatAzureFunctions, nil
	case cols["window_start_s"] && cols["rate_rps"]:
		return FormatServeGen, nil
	case cols["instance_sn"] && cols["creation_time"]:
		return FormatDLRMInstances, nil
	case cols[colMonTime] && cols[colMonValue]:
		return "", fmt.Errorf("%w: header %s is a GenTD26 monitoring file (timestamp_anon,value); a load-latency file such as basemodel_update_latency_anon.csv is a cold-start distribution: pass it as --cold-start=FILE", ErrNotRequests, quoteHead(h))
	case cols[colGenTimestamp]:
		return FormatGeneric, nil
	}
	if looksBinary(h) {
		return "", fmt.Errorf("%w: not a recognised CSV trace (binary data; the file starts %s)", ErrUnknownFormat, quoteHead(h))
	}
	return "", fmt.Errorf("%w: not a recognised CSV trace: header %s matches no format; pass --format (one of %v)", ErrUnknownFormat, quoteHead(h), Formats())
}

// ErrAmbiguousFolder is returned by ResolvePath for a folder holding several
// traces: the caller must name one.
var ErrAmbiguousFolder = errors.New("folder holds several traces; pass one file")

// ResolvePath turns a folder into the one trace inside it (a file is
// returned unchanged): the folder's *.csv files whose header DetectFormat
// recognises (monitoring and load-latency CSVs are not traces). A folder
// with several traces is ErrAmbiguousFolder, listing them; one with none is
// an error naming the CSV files it has.
func ResolvePath(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return path, nil
	}
	csvs, err := filepath.Glob(filepath.Join(path, "*.csv"))
	if err != nil {
		return "", err
	}
	var found []string
	for _, p := range csvs {
		if f, err := headerFormat(p); err == nil {
			found = append(found, fmt.Sprintf("%s (%s)", p, f))
		}
	}
	switch len(found) {
	case 1:
		p, _, _ := strings.Cut(found[0], " (")
		return p, nil
	case 0:
		if len(csvs) == 0 {
			return "", noCSVFiles(path)
		}
		names := make([]string, len(csvs))
		for i, p := range csvs {
			names[i] = filepath.Base(p)
		}
		return "", fmt.Errorf("%s: no trace among its %d CSV files (%s); pass a trace file", path, len(csvs), strings.Join(names, ", "))
	}
	return "", fmt.Errorf("%s: %w (--trace=FILE):\n  %s", path, ErrAmbiguousFolder, strings.Join(found, "\n  "))
}

// maxListed bounds the subfolders noCSVFiles names.
const maxListed = 10

// noCSVFiles is ResolvePath's error for a folder without *.csv files,
// naming at most maxListed of its subfolders (it said "no trace among its 0
// CSV files ()").
func noCSVFiles(path string) error {
	entries, _ := os.ReadDir(path) // sorted by name; unreadable: no subfolders named
	var dirs []string
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			if n++; len(dirs) < maxListed {
				dirs = append(dirs, e.Name())
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: the folder has no CSV files; pass a trace file or a folder holding one", path)
	}
	more := ""
	if n > len(dirs) {
		more = fmt.Sprintf(" and %d more", n-len(dirs))
	}
	return fmt.Errorf("%s: the folder has no CSV files, only %d subfolders (%s%s); pass a trace file or the subfolder holding one", path, n, strings.Join(dirs, ", "), more)
}

// headerFormat detects the format of the file at p from its first line.
func headerFormat(p string) (Format, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	line, err := br.Peek(br.Size())
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return "", err
	}
	first, _, _ := strings.Cut(string(line), "\n")
	return DetectFormat(first)
}

// Loaded is a trace file read into memory in the form its format needs.
type Loaded struct {
	Format Format
	Name   string
	// Trace is set for per-request formats (and azure-functions).
	Trace *Trace
	// ServeGen is set for the servegen format.
	ServeGen *ServeGen
	// Instances is set for dlrm-instances.
	Instances *Instances
}

// Load opens path and reads it as format (detected from the header when
// empty). Errors name path: ErrEmptyFile for a zero-byte file,
// ErrUnknownFormat (quoting at most the first 80 bytes) for one that is not
// a recognised CSV trace, ErrEmptyTrace for a request trace without rows. seed drives synthesized arrivals (azure-functions spreads each
// minute's invocations; servegen synthesizes requests lazily later).
func Load(path string, format Format, seed uint64) (*Loaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	if _, err := br.Peek(1); err == io.EOF {
		return nil, fmt.Errorf("%s: %w", path, ErrEmptyFile)
	}
	if format == "" {
		line, err := br.Peek(min(br.Size(), 64<<10))
		if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
		first, _, _ := strings.Cut(string(line), "\n")
		if format, err = DetectFormat(first); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	name := filepath.Base(path)
	l := &Loaded{Format: format, Name: name}
	wrap := func(err error) error { return fmt.Errorf("%s (%s): %w", path, format, err) }
	var src Source
	switch format {
	case FormatAzureLLM:
		src, err = NewAzureLLM(br)
	case FormatGeneric:
		src, err = NewGeneric(br)
	case FormatGenTD26:
		src, err = NewGenTD26(br)
	case FormatAzureFunctions:
		var fm *FunctionsMatrix
		if fm, err = ReadFunctionsMatrix(br); err == nil {
			src = fm.Requests(seed)
		}
	case FormatServeGen:
		l.ServeGen, err = ReadServeGen(br)
		if err != nil {
			return nil, wrap(err)
		}
		return l, nil
	case FormatDLRMInstances:
		l.Instances, err = ReadInstances(br)
		if err != nil {
			return nil, wrap(err)
		}
		return l, nil
	default:
		return nil, fmt.Errorf("%w %q: want one of %v", ErrUnknownFormat, format, Formats())
	}
	if err != nil {
		return nil, wrap(err)
	}
	if l.Trace, err = ReadAll(name, format, src); err != nil {
		return nil, wrap(err)
	}
	if len(l.Trace.Requests) == 0 {
		if l.Trace.Skipped > 0 {
			return nil, wrap(fmt.Errorf("%w: all %d rows were left out (%s)", ErrEmptyTrace, l.Trace.Skipped, l.Trace.SkipReason))
		}
		return nil, wrap(fmt.Errorf("%w: the file has a header and no rows", ErrEmptyTrace))
	}
	return l, nil
}
