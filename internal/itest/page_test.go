package itest

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
)

// chromiumBin returns the Chromium scripts/test.sh installs (Debian's chromium); with
// MQTARGET_INTEGRATION set it must exist.
func chromiumBin(t *testing.T) string {
	Integration(t)
	bin := os.Getenv("MQTARGET_CHROMIUM")
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("chromium (scripts/test.sh installs Debian's chromium; MQTARGET_CHROMIUM names another): %v", err)
	}
	return bin
}

// headless runs one headless Chromium on url with a profile of its own and returns its standard output.
// The flags keep it off the network (no updates, sync or QUIC probes) and off the GPU; no sandbox,
// because CI runs as root. --virtual-time-budget lets the page's timers and fetches run before the DOM
// is dumped or the screenshot taken.
func headless(t *testing.T, bin, url string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000"}
	cmd := exec.CommandContext(ctx, bin, append(append(flags, args...), url)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, tail(stderr.String(), 800))
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

var (
	send1Row   = routeRow("/send1")
	rtRow      = routeRow("/sendRoundTrip")
	rateCell   = regexp.MustCompile(`<td class="rate" data-value="([0-9.e+-]+)">`)
	totalCell  = regexp.MustCompile(`(?s)<td class="l status-total">(.*?)</td>`)
	hostRow    = regexp.MustCompile(`(?s)<tr[^>]*data-broker="nsq" data-host="127\.0\.0\.1:\d+"[^>]*>(.*?)</tr>`)
	versionBox = regexp.MustCompile(`<b id="version">([^<]*)</b>`)
)

// routeRow matches an endpoint's row of the live page's table.
func routeRow(route string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)<tr[^>]*data-route="` + regexp.QuoteMeta(route) + `"[^>]*>(.*?)</tr>`)
}

// checkPage reports what the dumped DOM still lacks: the /send1 row with a positive rate and the 400
// count, a /sendRoundTrip row with a positive rate (the page shows it once used), the version, and
// the embedded nsqd hosts marked up.
func checkPage(dom string, bad400 int) error {
	if !strings.Contains(dom, `<div id="live" class="ok">live</div>`) {
		return fmt.Errorf("the page has not shown /stats yet")
	}
	row := send1Row.FindStringSubmatch(dom)
	if row == nil {
		return fmt.Errorf("no /send1 row")
	}
	m := rateCell.FindStringSubmatch(row[1])
	if m == nil {
		return fmt.Errorf("/send1 row has no rate: %s", row[1])
	}
	if r, err := strconv.ParseFloat(m[1], 64); err != nil || r <= 0 {
		return fmt.Errorf("/send1 rate %q, want > 0", m[1])
	}
	rt := rtRow.FindStringSubmatch(dom)
	if rt == nil {
		return fmt.Errorf("no /sendRoundTrip row")
	}
	if m := rateCell.FindStringSubmatch(rt[1]); m == nil {
		return fmt.Errorf("/sendRoundTrip row has no rate: %s", rt[1])
	} else if r, err := strconv.ParseFloat(m[1], 64); err != nil || r <= 0 {
		return fmt.Errorf("/sendRoundTrip rate %q, want > 0", m[1])
	}
	totals := totalCell.FindStringSubmatch(row[1])
	want400 := fmt.Sprintf(`data-code="400" data-value="%d">400: %d</span>`, bad400, bad400)
	if totals == nil || !strings.Contains(totals[1], want400) || !strings.Contains(totals[1], `data-code="200"`) {
		return fmt.Errorf("/send1 totals by status lack 200 and %d answers of 400: %v", bad400, totals)
	}
	if v := versionBox.FindStringSubmatch(dom); v == nil || v[1] == "" || v[1] == "…" {
		return fmt.Errorf("no version shown: %v", v)
	}
	hosts := hostRow.FindAllStringSubmatch(dom, -1)
	if len(hosts) != 3 { // nsq.embedded's default
		return fmt.Errorf("%d nsq host rows, want 3", len(hosts))
	}
	for _, h := range hosts {
		if !strings.Contains(h[1], `state-up">up</td>`) || !strings.Contains(h[1], `<td class="connections">`) {
			return fmt.Errorf("nsq host row without state up or connections: %s", h[1])
		}
	}
	return nil
}

// livePageTarget starts mqtarget with its embedded nsqd, answers 200 and bad times 400 on /send1 and
// one /sendRoundTrip, and keeps /send1 and /sendRoundTrip traffic going until the test ends, so that
// whichever window the page shows has answers of both in it (one round trip every fifth tick).
func livePageTarget(t *testing.T, bad int) *Target {
	tg := StartTarget(t, nil, nil)
	for range 20 {
		if r := tg.Get(t, "/send1"); r.Status != http.StatusOK {
			t.Fatalf("/send1: %d %s", r.Status, r.Error)
		}
	}
	for range bad {
		if r := tg.Get(t, "/send1?size=0"); r.Status != http.StatusBadRequest {
			t.Fatalf("/send1?size=0: %d, want 400", r.Status)
		}
	}
	if r := tg.Get(t, "/sendRoundTrip"); r.Status != http.StatusOK {
		t.Fatalf("/sendRoundTrip: %d %s", r.Status, r.Error)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // cleanups run last first: cancel, then wait, then the target's shutdown
	t.Cleanup(cancel)
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			path := "/send1"
			if n%5 == 4 {
				path = "/sendRoundTrip"
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tg.Base+path, nil)
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	})
	return tg
}

// TestLivePageInChromium opens the live page in headless Chromium against mqtarget with its embedded
// nsqd, after answers of 200 and 400 and while /send1 traffic goes on, and checks that the page shows
// them; it keeps a screenshot (and writes it to $MQTARGET_PAGE_SCREENSHOT when set, for docs/).
func TestLivePageInChromium(t *testing.T) {
	bin := chromiumBin(t)
	const bad = 3
	tg := livePageTarget(t, bad)

	// One Chromium run both dumps the DOM and takes the screenshot: a start costs seconds on a busy machine.
	shot := t.TempDir() + "/live-page.png"
	start, tries := time.Now(), 0
	testwait.Until(t, 25*time.Second, "the page shows /send1's rate and its 400 answers, and /sendRoundTrip's rate", func() error {
		tries++
		dom, err := headless(t, bin, tg.Base+"/", "--window-size=1400,760", "--hide-scrollbars", "--screenshot="+shot, "--dump-dom")
		if err != nil {
			return err
		}
		return checkPage(string(dom), bad)
	})
	t.Logf("the page showed what it should after %d Chromium runs, %v", tries, time.Since(start).Round(time.Millisecond))
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot %s (%d bytes) is no PNG: %v", shot, len(data), err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 760 {
		t.Errorf("screenshot is %v, want 1400x760", b)
	}
	// A blank page is one colour; the rendered tables are many.
	colours := map[uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 7 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|b>>8] = true
		}
	}
	if len(colours) < 8 {
		t.Errorf("screenshot has %d colours: blank?", len(colours))
	}
	if dst := os.Getenv("MQTARGET_PAGE_SCREENSHOT"); dst != "" {
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// measureWidths is appended to the live page by TestLivePageFitsNarrowWindow's proxy: it records, as
// attributes of <html> that --dump-dom shows, how wide the document is against its viewport and the
// elements that stick out past the viewport's right edge or scroll sideways inside themselves (an
// overflow-x: auto table wrapper would keep the document narrow and still scroll).
const measureWidths = `<script>
setInterval(() => {
  const d = document.documentElement, out = [], seen = new Set();
  for (const e of document.body.querySelectorAll("*")) {
    const r = e.getBoundingClientRect(), name = e.tagName.toLowerCase() + (e.id ? "#" + e.id : "");
    let what = "";
    if (r.right > d.clientWidth + 0.5) what = name + " right " + Math.round(r.right);
    else if (getComputedStyle(e).overflowX !== "visible" && e.scrollWidth > e.clientWidth + 1) what = name + " scrolls " + e.scrollWidth;
    if (!what) continue;
    seen.add(e);
    if (!seen.has(e.parentElement)) out.push(what); // the outermost only: its cells say nothing more
  }
  d.dataset.scrollWidth = d.scrollWidth;
  d.dataset.clientWidth = d.clientWidth;
  d.dataset.wide = out.join(", ");
}, 100);
</script>`

var (
	htmlTag = regexp.MustCompile(`<html[^>]*>`)
	bodyEnd = []byte("</body>")
)

// htmlData returns the data-NAME attribute of the dumped DOM's <html> tag, unescaped (ok false without it).
func htmlData(dom, name string) (string, bool) {
	m := regexp.MustCompile(`\sdata-` + name + `="([^"]*)"`).FindStringSubmatch(htmlTag.FindString(dom))
	if m == nil {
		return "", false
	}
	return html.UnescapeString(m[1]), true
}

// measuringProxy serves tg through a reverse proxy that appends measureWidths to the live page: the
// script must come from the page's own origin to read its layout, and mqtarget has no hook for it.
func measuringProxy(t *testing.T, tg *Target) string {
	u, err := url.Parse(tg.Base)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	director := p.Director
	p.Director = func(r *http.Request) {
		director(r)
		r.Header.Del("Accept-Encoding") // the body is rewritten: plain text
	}
	p.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if !bytes.Contains(body, bodyEnd) {
			return fmt.Errorf("the live page has no %s", bodyEnd)
		}
		body = bytes.Replace(body, bodyEnd, append([]byte(measureWidths), bodyEnd...), 1)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// narrowWidth is the window the live page must fit without sideways scrolling (issue #20: "readable at
// 900 px"; the hosts table scrolled sideways there).
const narrowWidth = 900

// TestLivePageFitsNarrowWindow opens the live page at 900 px, once it shows its rows (both tables
// filled), and checks that neither the document nor any element of it scrolls sideways.
func TestLivePageFitsNarrowWindow(t *testing.T) {
	bin := chromiumBin(t)
	const bad = 3
	tg := livePageTarget(t, bad)
	base := measuringProxy(t, tg)
	var scroll, viewport int
	var wide string
	testwait.Until(t, 25*time.Second, "the page at 900 px shows its rows and its measured widths", func() error {
		// No --hide-scrollbars: a real window's vertical scrollbar takes its width from the page.
		dom, err := headless(t, bin, base+"/", fmt.Sprintf("--window-size=%d,760", narrowWidth), "--dump-dom")
		if err != nil {
			return err
		}
		if err := checkPage(string(dom), bad); err != nil {
			return err
		}
		sw, ok1 := htmlData(string(dom), "scroll-width")
		cw, ok2 := htmlData(string(dom), "client-width")
		w, ok3 := htmlData(string(dom), "wide")
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("no widths measured: %s", htmlTag.FindString(string(dom)))
		}
		scroll, _ = strconv.Atoi(sw)
		viewport, _ = strconv.Atoi(cw)
		wide = w
		return nil
	})
	if viewport < narrowWidth-40 || viewport > narrowWidth {
		t.Fatalf("viewport %d px wide in a %d px window: not the width asked for", viewport, narrowWidth)
	}
	t.Logf("at %d px: document %d px wide, viewport %d px", narrowWidth, scroll, viewport)
	if scroll > viewport || wide != "" {
		t.Errorf("at %d px the page is %d px wide in a %d px viewport; sticking out or scrolling: %s",
			narrowWidth, scroll, viewport, wide)
	}
}
