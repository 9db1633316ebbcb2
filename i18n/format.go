package i18n

import (
	"strconv"
	"time"
)

// Date writes the day of t (in UTC) as the language writes a date in a sentence: "21 December
// 2026", "21. Dezember 2026", "1er décembre 2026", "21 de diciembre de 2026".
func (l *Locale) Date(t time.Time) string {
	t = t.UTC()
	day := strconv.Itoa(t.Day())
	if t.Day() == 1 {
		day = l.T("date.day_first") // French writes the first "1er"
	}
	return l.Tf("date.long", map[string]any{"Day": day, "Month": l.months[t.Month()-1], "Year": strconv.Itoa(t.Year())})
}

// DateTime writes t (in UTC) to the minute, saying it is UTC: "21 December 2026, 15:04 UTC".
func (l *Locale) DateTime(t time.Time) string {
	t = t.UTC()
	return l.Tf("date.time", map[string]any{"Date": l.Date(t), "Time": t.Format("15:04")})
}

// Minutes is d in whole minutes, rounded up (a code with 9 minutes 10 seconds left works "for 10
// minutes"), and at least 1.
func Minutes(d time.Duration) int { return max(int((d+time.Minute-1)/time.Minute), 1) }

// Days is d in whole days, rounded up, and at least 1.
func Days(d time.Duration) int { return max(int((d+24*time.Hour-1)/(24*time.Hour)), 1) }

// InMinutes says when something due after d happens: "in 10 minutes", "in 10 Minuten".
func (l *Locale) InMinutes(d time.Duration) string {
	return l.Tn("duration.in_minutes", Minutes(d), nil)
}

// WithinMinutes says a time limit of d: "within 15 minutes", "innerhalb von 15 Minuten".
func (l *Locale) WithinMinutes(d time.Duration) string {
	return l.Tn("duration.within_minutes", Minutes(d), nil)
}

// WithinDays says a time limit of d in days: "within 7 days", "innerhalb von 7 Tagen".
func (l *Locale) WithinDays(d time.Duration) string {
	return l.Tn("duration.within_days", Days(d), nil)
}

// InLastDays says a past period of d in days: "in the last 90 days", "in den letzten 90 Tagen".
func (l *Locale) InLastDays(d time.Duration) string {
	return l.Tn("duration.in_last_days", Days(d), nil)
}

// DeviceName is a device as a person reads it, from its browser (or app) and its platform (its
// system, or "iPhone" and "iPad" for iOS): "Chrome on macOS", "Safari auf dem iPhone", "Firefox
// sous Windows", or the browser alone, or "Unknown device". Product and system names are names,
// the same in every language; only the words around them are translated.
func (l *Locale) DeviceName(browser, platform string) string {
	switch {
	case browser != "" && (platform == "iPhone" || platform == "iPad"):
		return l.Tf("device.on_hardware", map[string]any{"Browser": browser, "Platform": platform})
	case browser != "" && platform != "":
		return l.Tf("device.on_system", map[string]any{"Browser": browser, "Platform": platform})
	case browser != "":
		return browser
	case platform == "iPhone" || platform == "iPad":
		return l.Tf("device.browser_on_hardware", map[string]any{"Platform": platform})
	case platform != "":
		return l.Tf("device.browser_on_system", map[string]any{"Platform": platform})
	}
	return l.T("device.unknown")
}
