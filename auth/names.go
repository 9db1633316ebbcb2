package auth

import "unicode"

// The characters of a name that render as nothing (ValidateName).
const (
	zeroWidthNonJoiner = '\u200C'
	zeroWidthJoiner    = '\u200D'
	brailleBlank       = '\u2800'
	// nullNotehead is U+1D159 MUSICAL SYMBOL NULL NOTEHEAD, a symbol drawn as nothing.
	nullNotehead = '\U0001D159'
)

// joiningScripts are the scripts whose words use the zero-width joiner or non-joiner to choose a
// letter's form (Persian writes many words with a non-joiner; Indic scripts choose conjuncts with
// both). In Latin, Greek or Cyrillic text a joiner changes nothing one can see, so it can only
// disguise a name.
var joiningScripts = []*unicode.RangeTable{
	unicode.Arabic, unicode.Syriac, unicode.Nko, unicode.Mongolian, unicode.Devanagari, unicode.Bengali,
	unicode.Gurmukhi, unicode.Gujarati, unicode.Oriya, unicode.Tamil, unicode.Telugu, unicode.Kannada,
	unicode.Malayalam, unicode.Sinhala, unicode.Tibetan, unicode.Myanmar, unicode.Khmer, unicode.Balinese,
	unicode.Javanese,
}

// ignorable are the default-ignorable code points outside Cf that are not variation selectors:
// fillers that render blank (the Hangul ones are a known way to make an "invisible" name) and the
// combining grapheme joiner. Cf and the variation selectors are handled on their own.
var ignorable = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x034F, Hi: 0x034F, Stride: 1},
		{Lo: 0x115F, Hi: 0x1160, Stride: 1},
		{Lo: 0x17B4, Hi: 0x17B5, Stride: 1},
		{Lo: 0x3164, Hi: 0x3164, Stride: 1},
		{Lo: 0xFFA0, Hi: 0xFFA0, Stride: 1},
		{Lo: 0xFFF0, Hi: 0xFFF8, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0xE0000, Hi: 0xE0FFF, Stride: 1}, // tags and unassigned; the selectors in it are let through first
	},
}

// variationSelector reports the code points that pick a glyph's form: the emoji and text styles
// (U+FE0E, U+FE0F), the Mongolian free variation selectors and the ideographic variation
// selectors that Japanese names use for a particular form of a kanji.
func variationSelector(r rune) bool {
	return r >= 0xFE00 && r <= 0xFE0F || r >= 0x180B && r <= 0x180D || r == 0x180F || r >= 0xE0100 && r <= 0xE01EF
}

// visibleRune reports whether r puts ink on the page by itself: not a space, a format character,
// a mark, a variation selector, a filler or a symbol drawn blank.
func visibleRune(r rune) bool {
	return unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.Is(unicode.Cf, r) && !unicode.IsMark(r) &&
		!variationSelector(r) && !unicode.Is(ignorable, r) && r != brailleBlank && r != nullNotehead
}

// assigned reports whether r is a character Unicode (as Go knows it) has assigned: letters,
// marks, numbers, punctuation, symbols, separators, controls, format and private-use characters.
// An unassigned code point has no glyph today, and some ranges of them are reserved to be ignored
// (U+2065, U+FFF0-U+FFF8), so a name refuses them.
func assigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co)
}

// nameRuneAllowed reports whether runes[i] may stand where it stands in a name.
func nameRuneAllowed(runes []rune, i int) bool {
	r := runes[i]
	switch {
	case unicode.IsControl(r), r == '\u2028', r == '\u2029', !assigned(r):
		return false
	case variationSelector(r):
		// After what it styles: a visible character, or a mark on one (but not another selector).
		prev := rune(0)
		if i > 0 {
			prev = runes[i-1]
		}
		return visibleRune(prev) || unicode.IsMark(prev) && !variationSelector(prev)
	case r == zeroWidthJoiner || r == zeroWidthNonJoiner:
		return joinerAllowed(runes, i)
	case unicode.Is(unicode.Cf, r), unicode.Is(ignorable, r):
		return false
	}
	return true
}

// joinerAllowed reports whether the joiner at runes[i] does visible work: between two letters or
// marks of a script that joins, or between two emoji (an emoji sequence such as 👩‍💻, where the
// character before it may carry a variation selector or a skin-tone modifier).
func joinerAllowed(runes []rune, i int) bool {
	if i == 0 || i == len(runes)-1 {
		return false
	}
	prev, next := runes[i-1], runes[i+1]
	for j := i - 1; j > 0 && (variationSelector(prev) || unicode.IsMark(prev)); j-- {
		prev = runes[j-1]
	}
	if joins(prev) && (joins(next) || unicode.IsMark(next)) {
		return true
	}
	return runes[i] == zeroWidthJoiner && emojiLike(prev) && emojiLike(next)
}

// joins reports a letter or mark of a joining script.
func joins(r rune) bool {
	if !unicode.IsLetter(r) && !unicode.IsMark(r) {
		return false
	}
	for _, script := range joiningScripts {
		if unicode.Is(script, r) {
			return true
		}
	}
	return false
}

// emojiLike reports a symbol that may take part in an emoji sequence: a pictograph or a
// modifier symbol (the skin tones are Sk).
func emojiLike(r rune) bool {
	return r >= 0x2000 && (unicode.Is(unicode.So, r) || unicode.Is(unicode.Sk, r))
}
