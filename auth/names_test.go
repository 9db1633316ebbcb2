package auth

import (
	"errors"
	"strings"
	"testing"
)

// ASVS 2.2.1: a name that could render blank or disguise itself is refused; names that need an
// invisible character to be written correctly are kept.
func TestValidateName_InvisibleCharacters(t *testing.T) {
	refused := []string{
		"\uFEFF", "Al\uFEFFice", "Alice\u00AD", "\u00ADAlice", "Al\u200Bice", "\u200B", "Al\u200Cice", "Al\u200Dice",
		"Alice\u200E", "\u200FAlice", "Al\u2060ice", "Al\u2061ice", "Al\u2062ice", "Al\u2063ice", "Al\u2064ice",
		"\U000E0041\U000E0042", "Alice\U000E0001", "\u200D", "\u200C", "\u200D\u200D", "a\u200D\u200Db",
		"\u061CAlice", "Al\u180Eice", "\u3164", "Al\u3164ice", "\u115F\u1160", "\uFFA0", "A\u034Flice",
		"line\u2028break", "para\u2029graph", "bad\nline", "evil\u202egnp.exe", "\u2066x\u2069", "tab\there",
		"\U000E007F", "\uFE0F", "\uFE0FAlice", "Al\u2065ice", "A\uFE00\uFE01", "Al\U0010FFFFice", "Al\uFFF0ice",
	}
	for _, name := range refused {
		if _, err := ValidateName(name); !isFieldError(err) {
			t.Errorf("ValidateName(%+q) = %v, want a field error", name, err)
		}
	}
	// Blank to the eye, with no invisible character: only spaces are trimmed; the blank braille
	// pattern and lone marks put nothing on the page.
	for _, name := range []string{"\u2800", "\u2800\u2800", "\u0301\u0301", " \u2800 ", "\U0001D159", "\U0001D159\u2800"} {
		if _, err := ValidateName(name); !isFieldError(err) {
			t.Errorf("ValidateName(%+q) = %v, want a field error", name, err)
		}
	}
	allowed := map[string]string{
		"":               "",
		"  ":             "",
		"Alice":          "Alice",
		" Zoë Ångström ": "Zoë Ångström",
		"\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645": "\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645", // Persian, a non-joiner inside a word
		"\u0915\u094D\u200D\u0937":                         "\u0915\u094D\u200D\u0937",                         // Devanagari half form
		"\U0001F469\u200D\U0001F4BB Ada":                   "\U0001F469\u200D\U0001F4BB Ada",                   // woman technologist
		"\U0001F3F3\uFE0F\u200D\U0001F308":                 "\U0001F3F3\uFE0F\u200D\U0001F308",                 // rainbow flag
		"\U0001F468\U0001F3FD\u200D\U0001F4BB":             "\U0001F468\U0001F3FD\u200D\U0001F4BB",             // with a skin tone
		"\u845B\U000E0100\u98FE":                           "\u845B\U000E0100\u98FE",                           // an ideographic variation sequence
		"\u2764\uFE0F Bob":                                 "\u2764\uFE0F Bob",
		"1\uFE0F\u20E3":                                    "1\uFE0F\u20E3",
		"Al\u2800ice":                                      "Al\u2800ice",
	}
	for name, want := range allowed {
		if got, err := ValidateName(name); err != nil || got != want {
			t.Errorf("ValidateName(%+q) = %+q, %v; want %+q", name, got, err, want)
		}
	}
	if _, err := ValidateName(strings.Repeat("n", MaxNameLength+1)); !isFieldError(err) {
		t.Errorf("a name of %d characters: %v", MaxNameLength+1, err)
	}
}

func isFieldError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe) && fe.Field == "name"
}
