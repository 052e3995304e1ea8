package diag

import "testing"

func TestRenderIsExactlyTwoStderrLines(t *testing.T) {
	d := &Diagnostic{Code: RootOutsideWorkdir, Message: "exports.files.root is outside", Hint: "point it inside"}
	want := "error[E-CAP-007]: exports.files.root is outside\n  hint: point it inside\n"
	if got := d.Render(); got != want {
		t.Errorf("Render() = %q, want %q", got, want)
	}
	if got := d.Error(); got != "error[E-CAP-007]: exports.files.root is outside" {
		t.Errorf("Error() = %q", got)
	}
}

func TestRenderStaysTwoLinesWhateverTheMessageQuotes(t *testing.T) {
	d := &Diagnostic{Code: ManifestUnreadable, Message: "cannot read /tmp/a\nb", Hint: "check\r\nit"}
	want := "error[E-MAN-002]: cannot read /tmp/a\\nb\n  hint: check\\r\\nit\n"
	if got := d.Render(); got != want {
		t.Errorf("Render() = %q, want %q", got, want)
	}
}

func TestAWarningRendersAsOneLine(t *testing.T) {
	w := Warning{Code: UnknownKey, Message: "unknown key exports.file\nignored", Key: "exports.file"}
	if got, want := w.Render(), "warning[W-SEC-019]: unknown key exports.file\\nignored\n"; got != want {
		t.Errorf("Render() = %q, want %q", got, want)
	}
}
