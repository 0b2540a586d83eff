package replay

import (
	"bytes"
	_ "embed"
)

// demoTrace is the Azure LLM inference trace 2023, coding service (Patel et
// al., "Splitwise", ISCA 2024; CC BY 4.0), unmodified; see demo/README.md.
//
//go:embed demo/AzureLLMInferenceTrace_code.csv
var demoTrace []byte

// DemoName names the embedded trace in reports.
const DemoName = "AzureLLMInferenceTrace_code.csv (embedded; Patel et al., Splitwise, ISCA 2024, CC BY 4.0)"

// DemoTrace reads the embedded Azure LLM code trace.
func DemoTrace() (*Trace, error) {
	src, err := NewAzureLLM(bytes.NewReader(demoTrace))
	if err != nil {
		return nil, err
	}
	return ReadAll(DemoName, FormatAzureLLM, src)
}
