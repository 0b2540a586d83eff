package replay

import (
	"bytes"
	"html"
	"strings"
	"testing"
)

// TestTableLegend: the printed table and report.html explain ✗, the
// setting sets, worst h, × opt and × bound under the table; the legend is
// not parsed into HTML table rows.
func TestTableLegend(t *testing.T) {
	c := demoCompare(t)
	var tb bytes.Buffer
	if err := c.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	text := tb.String()
	lastRow := strings.LastIndex(text, "|\n")
	legend := strings.Index(text, "\nLegend: ")
	if legend < lastRow || !strings.HasSuffix(text, ComparisonLegend+"\n") {
		t.Errorf("legend is not under the table:\n%s", text)
	}
	for _, w := range []string{"✗", "published", "tuned", "hindsight", "optimum", "bound", "worst h", "× opt", "× bound"} {
		if !strings.Contains(ComparisonLegend, w) {
			t.Errorf("legend does not explain %q", w)
		}
	}

	s, err := c.Section()
	if err != nil {
		t.Fatal(err)
	}
	if s.Legend != ComparisonLegend {
		t.Errorf("Section.Legend = %q, want ComparisonLegend", s.Legend)
	}
	for _, r := range s.Rows {
		if strings.Contains(strings.Join(r, " "), "Legend") {
			t.Errorf("legend parsed into a table row: %q", r)
		}
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, c.Trace, "", []Section{s}); err != nil {
		t.Fatal(err)
	}
	if want := `<p class="legend">` + html.EscapeString(ComparisonLegend) + `</p>`; !strings.Contains(page.String(), want) {
		t.Errorf("report.html lacks the legend paragraph %q", want)
	}
}
