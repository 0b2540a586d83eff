package front

// ReadChunk and ReaderOverhead are readHeldBody's buffer size and per-request charge, for tests.
const ReadChunk, ReaderOverhead = readChunk, readerOverhead

// ReadingBytes is the bytes charged for HTTP bodies being read for the model, for tests.
func (f *Front) ReadingBytes(model string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reading[model]
}
