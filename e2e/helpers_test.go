package e2e

import (
	"context"

	"github.com/chromedp/chromedp"
)

// chromedpSendKeys focuses the element and types text into it, key by key. (chromedp.SendKeys
// reads the node's attributes without its lock, which the race detector reports while the page
// changes attributes; Focus and KeyEvent do not.)
func chromedpSendKeys(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := chromedp.Focus(chromedp.CSS(sel))(ctx, t); err != nil {
			return err
		}
		_, err := chromedp.KeyEvent(text)(ctx, t)
		return err
	})
}

func chromedpClick(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel))
}

func chromedpSetValue(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), value)
}
