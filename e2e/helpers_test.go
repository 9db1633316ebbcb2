package e2e

import "github.com/chromedp/chromedp"

func chromedpSendKeys(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.SendKeys(chromedp.CSS(sel), text)
}

func chromedpClick(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel))
}

func chromedpSetValue(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), value)
}
