package views

import (
	"bytes"
	"context"
	"testing"

	"github.com/a-h/templ"
)

// The break marks are the only markup breakable writes: what it is given is escaped, so an
// address or a name with "@" (a value the emphasis template writes this way) cannot add markup.
func TestBreakableEscapesWhatItWrites(t *testing.T) {
	for _, c := range []struct {
		name string
		got  func() string
		want string
	}{
		{"an address", func() string { return render(t, breakableAddress("ann.lee@mail.example.com")) },
			"ann.lee<wbr>@mail.<wbr>example.<wbr>com"},
		{"markup in an address", func() string { return render(t, breakableAddress(`"<b>x</b>"@x.com`)) },
			"&#34;&lt;b&gt;x&lt;/b&gt;&#34;<wbr>@x.<wbr>com"},
		{"not an address", func() string { return render(t, breakableAddress("<img src=x onerror=alert(1)>")) },
			"&lt;img src=x onerror=alert(1)&gt;"},
		{"an IPv6 address", func() string { return render(t, breakableIP("2001:db8::1")) }, "2001:<wbr>db8:<wbr>:<wbr>1"},
		{"an IPv4 address", func() string { return render(t, breakableIP("203.0.113.7")) }, "203.0.113.7"},
	} {
		if got := c.got(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var b bytes.Buffer
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
