package roundtrip

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Formats are the output formats Result.Write knows.
var Formats = []string{"table", "json", "csv"}

// columns are the Result's fields in output order, by JSON name.
func (r Result) columns() ([]string, []string) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	names := []string{"broker", "count", "size", "send_ms", "echo_receive_ms", "echo_last_latency_ms", "echo_max_latency_ms",
		"return_receive_ms", "return_last_latency_ms", "rtt_p50_ms", "rtt_p99_ms", "rtt_max_ms", "lost", "duplicates"}
	values := []string{r.Broker, strconv.Itoa(r.Count), strconv.Itoa(r.Size), f(r.SendMs), f(r.EchoReceiveMs), f(r.EchoLastLatencyMs),
		f(r.EchoMaxLatencyMs), f(r.ReturnReceiveMs), f(r.ReturnLastLatencyMs), f(r.RTTP50Ms), f(r.RTTP99Ms), f(r.RTTMaxMs), strconv.Itoa(r.Lost), strconv.Itoa(r.Duplicates)}
	return names, values
}

// Write renders r as format (one of Formats): one JSON object, or a header and one row.
func (r Result) Write(w io.Writer, format string) error {
	names, values := r.columns()
	switch format {
	case "json":
		return json.NewEncoder(w).Encode(r)
	case "csv":
		cw := csv.NewWriter(w)
		_ = cw.Write(names)
		_ = cw.Write(values)
		cw.Flush()
		return cw.Error()
	case "table":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(names, "\t")+"\t")
		fmt.Fprintln(tw, strings.Join(values, "\t")+"\t")
		return tw.Flush()
	}
	return fmt.Errorf("unknown output format %q, want %s", format, strings.Join(Formats, ", "))
}
