package front

// ReadingBytes is the bytes of chunked HTTP bodies being read for the model, for tests.
func (f *Front) ReadingBytes(model string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reading[model]
}
