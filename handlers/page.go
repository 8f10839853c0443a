package handlers

import (
	_ "embed"
	"net/http"
	"strconv"
	"strings"
)

// page is the live page: one self-contained HTML file (styles and vanilla JS inline, no CDN, no build
// step) that polls /stats every second.
//
//go:embed static/index.html
var page []byte

var htmlType = []string{"text/html; charset=utf-8"}

func servePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Content-Type"] = htmlType
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Length", strconv.Itoa(len(page)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(page)
	}
}

// wantsHTML reports whether the Accept header values prefer text/html to JSON: browsers name text/html
// first and everything else at a lower q, while curl (*/*), scripts (application/json) and clients
// sending no Accept keep getting the JSON index. HTML must be named explicitly and weigh more than
// JSON; a tie keeps JSON.
func wantsHTML(accept []string) bool {
	qHTML, qJSON, qAppAny, qAny := 0.0, -1.0, -1.0, -1.0
	for _, v := range accept {
		for _, rng := range strings.Split(v, ",") {
			mt, params, _ := strings.Cut(rng, ";")
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(k, "q") {
					if f, err := strconv.ParseFloat(val, 64); err == nil {
						q = f
					}
				}
			}
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "text/html":
				qHTML = max(qHTML, q)
			case "application/json":
				qJSON = max(qJSON, q)
			case "application/*":
				qAppAny = max(qAppAny, q)
			case "*/*":
				qAny = max(qAny, q)
			}
		}
	}
	// The most specific range that matches JSON decides its weight (RFC 9110, 12.5.1).
	json := qJSON
	if json < 0 {
		json = qAppAny
	}
	if json < 0 {
		json = qAny
	}
	return qHTML > 0 && qHTML > json
}
