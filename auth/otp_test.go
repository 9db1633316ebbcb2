package auth

import (
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Catalogue A1: codes have the configured shape, every character of every position is equally
// likely (chi-square test over 400,000 codes), and nothing in the service imports math/rand.
func TestGenerateCode_ShapeAndUniformity(t *testing.T) {
	// 400,000 codes and p = 10⁻⁶ per position: a fair generator fails about once in 170,000
	// runs (at 100,000 and p = 0.001 it failed CI about once in 170), while the modulo bias of
	// mapping a random byte onto the alphabet without rejection gives a chi-square near 120.
	const n = 400000
	k := len(OTPAlphabet)
	counts := make([][]int, OTPLength)
	for i := range counts {
		counts[i] = make([]int, k)
	}
	for i := 0; i < n; i++ {
		code, err := generateCode()
		if err != nil {
			t.Fatal(err)
		}
		if !validCodeShape(code) {
			t.Fatalf("generated %q", code)
		}
		for pos := 0; pos < OTPLength; pos++ {
			counts[pos][strings.IndexByte(OTPAlphabet, code[pos])]++
		}
	}
	// Critical value of chi-square with k-1 degrees of freedom at p = 10⁻⁶ (z = 4.753), by the
	// Wilson-Hilferty approximation.
	df := float64(k - 1)
	critical := df * math.Pow(1-2/(9*df)+4.753*math.Sqrt(2/(9*df)), 3)
	expected := float64(n) / float64(k)
	for pos, c := range counts {
		chi := 0.0
		for _, observed := range c {
			d := float64(observed) - expected
			chi += d * d / expected
		}
		if chi > critical {
			t.Errorf("position %d: chi-square %.1f > %.1f, counts %v", pos, chi, critical, c)
		}
	}
}

func TestNoMathRand(t *testing.T) {
	root := ".."
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && (info.Name() == "node_modules" || strings.HasPrefix(info.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); p == "math/rand" || p == "math/rand/v2" {
				t.Errorf("%s imports %s; secrets must come from crypto/rand", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestValidCodeShape(t *testing.T) {
	for _, s := range []string{"012345", "999999", "000000"} {
		if !validCodeShape(s) {
			t.Errorf("validCodeShape(%q) = false", s)
		}
	}
	for _, s := range []string{"", "12345", "1234567", "12345a", " 12345", "１２３４５６", "12 345"} {
		if validCodeShape(s) {
			t.Errorf("validCodeShape(%q) = true", s)
		}
	}
}

// A code's hash is bound to its purpose, subject and address (catalogue B17, B18).
func TestCodeHashBinding(t *testing.T) {
	k, err := newKeys([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	base := k.codeHash(PurposeSignIn, "a@x.io", "a@x.io", "123456")
	for _, other := range []string{
		k.codeHash("change-email", "a@x.io", "a@x.io", "123456"),
		k.codeHash(PurposeSignIn, "b@x.io", "a@x.io", "123456"),
		k.codeHash(PurposeSignIn, "a@x.io", "b@x.io", "123456"),
		k.codeHash(PurposeSignIn, "a@x.io", "a@x.io", "123457"),
		k.codeHash(PurposeSignIn, "a@x.io\x00", "a@x.io", "123456"[1:]),
	} {
		if other == base {
			t.Fatal("two different requests share a code hash")
		}
	}
	k2, _ := newKeys([]byte("another secret of enough length!"))
	if k2.codeHash(PurposeSignIn, "a@x.io", "a@x.io", "123456") == base {
		t.Fatal("the code hash does not depend on the secret")
	}
	if base != k.codeHash(PurposeSignIn, "a@x.io", "a@x.io", "123456") {
		t.Fatal("the code hash is not deterministic")
	}
}

func TestOTPInputMode(t *testing.T) {
	if OTPAlphabet == "0123456789" && OTPInputMode() != "numeric" {
		t.Fatalf("digits give inputmode %q, want numeric", OTPInputMode())
	}
}
