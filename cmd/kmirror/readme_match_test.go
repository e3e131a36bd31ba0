package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// How a documented answer is compared with what the command printed. Both
// go through the same normalisation, line by line, and then the documented
// lines must match the output's:
//
//   - Blank lines are ignored, runs of spaces count as one, and leading and
//     trailing spaces none.
//   - "..." alone on a line stands for any number of lines (none included).
//     A line that begins with "... " may come after other lines, and one
//     that ends with " ..." may be followed by other lines. Otherwise the
//     answer is the output from its first line to its last.
//   - Within a line or a JSON string, "..." stands for any text.
//   - A line that starts with { or [ (or "data: {", an event stream's data)
//     is JSON, compared with the output's line as JSON: an object matches
//     when each documented key is there with a matching value (keys the
//     README leaves out are allowed: it shows what a reader needs); an array
//     when its elements match in order, a "..." element standing for any
//     number of elements; strings, numbers, true, false and null when they
//     are equal. The keys in readmeVolatileKeys (ids, offsets, lag, rates,
//     durations) match any value of the documented type.
//   - Timestamps (RFC 3339) become <time>, Go durations ("500ms", "1m30s",
//     "4 ms") <duration>, an event stream's "id: 57" "id: <id>", tokens
//     (kmt_...) and SHA-256 hex digests placeholders, in text and in JSON
//     strings alike.
//   - In the CLI's tables, the columns whose values the demo traffic moves
//     (readmeVolatileColumns: SOURCE-OFFSET, DESTINATION-OFFSET, LAG,
//     NEWEST-NOT-COPIED, LAG-TIME) become <n>, cut at the header's column positions
//     ("-", not known yet, too: right after a start the offsets are not).
//     The failover preview's last line counts the records the demo produced
//     since the last checkpoint, so "no record" and "N record(s) of M
//     topic(s)" are one answer.
//   - For a command that streams (curl -N), which the test cuts after a
//     while, the documented lines may come anywhere in what arrived.

// readmeVolatileKeys are the JSON keys whose values change from run to run.
var readmeVolatileKeys = map[string]bool{
	"id": true, "request_id": true, "owner": true, "epoch": true, "incarnation": true, "mirror_incarnation": true,
	"source_offset": true, "destination_offset": true, "lag": true, "records_per_sec": true,
	"last_mirrored_source_offset": true, "last_mirrored_destination_offset": true,
	"waited_ms": true, "duration_ms": true, "throttled_ms": true, "throttled_seconds": true,
}

// readmeVolatileColumns are the CLI table columns whose values the demo
// traffic moves.
var readmeVolatileColumns = map[string]bool{
	"SOURCE-OFFSET": true, "DESTINATION-OFFSET": true, "LAG": true, "NEWEST-NOT-COPIED": true, "LAG-TIME": true,
}

var readmeNormalisers = []struct {
	re *regexp.Regexp
	to string
}{
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`), "<time>"},
	{regexp.MustCompile(`\b(\d+(\.\d+)?(h|ms|µs|us|ns|m|s))+\b`), "<duration>"},
	{regexp.MustCompile(`\b\d+ ms\b`), "<duration>"},
	{regexp.MustCompile(`^id: \d+$`), "id: <id>"},
	{regexp.MustCompile(`kmt_\S+`), "kmt_<token>"},
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), "<sha256>"},
	{regexp.MustCompile(`Removing would leave (no record|\d+ record\(s\) of \d+ topic\(s\)) behind( \(the oldest \S+ old\))?`),
		"Removing would leave <n> record(s) of <n> topic(s) behind"},
}

// normaliseText is a text line or a JSON string as it is compared.
func normaliseText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	for _, n := range readmeNormalisers {
		s = n.re.ReplaceAllString(s, n.to)
	}
	return s
}

// normaliseTables puts <n> in the volatile columns of the CLI's tables: a
// header line names the columns, and the rows after it, up to a blank line,
// are cut at the header's column positions (the CLI pads with fmt, which
// counts runes).
func normaliseTables(lines []string) []string {
	out := make([]string, len(lines))
	var starts []int
	var volatile []bool
	for i, l := range lines {
		out[i] = l
		switch {
		case strings.TrimSpace(l) == "":
			starts, volatile = nil, nil
		case tableHeader(l, &starts, &volatile):
		case starts != nil && !tableRow([]rune(l), starts):
			// A line after the table, such as the failover preview's summary.
			starts, volatile = nil, nil
		case starts != nil:
			r := []rune(l)
			cells := make([]string, len(starts))
			for k, start := range starts {
				end := len(r)
				if k+1 < len(starts) {
					end = min(starts[k+1], len(r))
				}
				if start < end {
					cells[k] = strings.TrimSpace(string(r[start:end]))
				}
				if volatile[k] && cells[k] != "" && cells[k] != "..." {
					cells[k] = "<n>"
				}
			}
			out[i] = strings.Join(cells, " ")
		}
	}
	return out
}

// tableRow says whether r is laid out as a row of the table whose columns
// start at starts: a space before each column that r reaches.
func tableRow(r []rune, starts []int) bool {
	for _, start := range starts[1:] {
		if start < len(r) && r[start-1] != ' ' {
			return false
		}
	}
	return true
}

var tableHeaderWord = regexp.MustCompile(`^[A-Z][A-Z-]+$`)

// tableHeader says whether l is the header of a table with volatile
// columns and, if so, sets where each column starts and which are volatile.
func tableHeader(l string, starts *[]int, volatile *[]bool) bool {
	fields := strings.Fields(l)
	moving := false
	for _, f := range fields {
		if !tableHeaderWord.MatchString(f) {
			return false
		}
		moving = moving || readmeVolatileColumns[f]
	}
	if !moving {
		return false
	}
	*starts, *volatile = nil, nil
	col, inWord := 0, false
	for _, r := range l {
		if r != ' ' && !inWord {
			*starts = append(*starts, col)
		}
		inWord = r != ' '
		col++
	}
	for _, f := range fields {
		*volatile = append(*volatile, readmeVolatileColumns[f])
	}
	return true
}

// readmeItem is one documented line, or a wildcard.
type readmeItem struct {
	any    bool     // any number of lines
	text   string   // a text line, normalised, "..." standing for any text
	prefix string   // before the JSON: "data: " or ""
	json   *jsonPat // a JSON line
	shown  string   // as documented, for messages
}

// readmeOut is one output line.
type readmeOut struct {
	text   string // normalised
	prefix string
	json   any // decoded, when the line is JSON
	isJSON bool
	shown  string
}

// readmeAnswer turns a documented answer into items; stream says the
// command streams, so the answer may come anywhere in its output.
func readmeAnswer(doc []string, stream bool) ([]readmeItem, error) {
	var items []readmeItem
	if stream {
		items = append(items, readmeItem{any: true, shown: "..."})
	}
	for _, l := range normaliseTables(readmeAnswerLines(doc)) {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
		case l == "...":
			items = append(items, readmeItem{any: true, shown: l})
		default:
			if prefix, js := jsonPart(l); js != "" {
				p, err := parseJSONPat(js)
				if err != nil {
					return nil, fmt.Errorf("documented JSON %q: %w", l, err)
				}
				items = append(items, readmeItem{prefix: prefix, json: p, shown: l})
				continue
			}
			before, after := strings.HasPrefix(l, "... "), strings.HasSuffix(l, " ...")
			if before {
				items = append(items, readmeItem{any: true, shown: "..."})
			}
			items = append(items, readmeItem{text: normaliseText(l), shown: l})
			if after {
				items = append(items, readmeItem{any: true, shown: "..."})
			}
		}
	}
	if stream {
		items = append(items, readmeItem{any: true, shown: "..."})
	}
	return items, nil
}

// readmeOutput splits a command's output into lines as they are compared.
func readmeOutput(out string) []readmeOut {
	var lines []readmeOut
	for _, l := range normaliseTables(strings.Split(out, "\n")) {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		o := readmeOut{text: normaliseText(l), shown: l}
		if prefix, js := jsonPart(l); js != "" {
			dec := json.NewDecoder(strings.NewReader(js))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err == nil && dec.InputOffset() == int64(len(js)) {
				o.prefix, o.json, o.isJSON = prefix, v, true
			}
		}
		lines = append(lines, o)
	}
	return lines
}

// mismatch says why a documented line does not match an output line, or ""
// when it does.
func (it readmeItem) mismatch(o readmeOut) string {
	switch {
	case it.any:
		return ""
	case it.json != nil:
		if !o.isJSON || o.prefix != it.prefix {
			return "the output line is not JSON"
		}
		return it.json.match("$", "", o.json)
	case globMatch(it.text, o.text):
		return ""
	}
	return "the text differs"
}

// compareREADMEAnswer compares a documented answer with a command's output
// and returns "" when they match, else a diff saying where they part.
func compareREADMEAnswer(doc []string, out string, stream bool) (string, error) {
	items, err := readmeAnswer(doc, stream)
	if err != nil {
		return "", err
	}
	outs := readmeOutput(out)
	if readmeMatches(items, outs) {
		return "", nil
	}
	return readmeDiff(items, outs), nil
}

// readmeMatches says whether the items match the output lines, every one
// of them.
func readmeMatches(items []readmeItem, outs []readmeOut) bool {
	// ok[i][j]: items[i:] match outs[j:].
	ok := make([][]bool, len(items)+1)
	for i := range ok {
		ok[i] = make([]bool, len(outs)+1)
	}
	ok[len(items)][len(outs)] = true
	for i := len(items) - 1; i >= 0; i-- {
		for j := len(outs); j >= 0; j-- {
			switch {
			case items[i].any:
				ok[i][j] = ok[i+1][j] || (j < len(outs) && ok[i][j+1])
			case j < len(outs):
				ok[i][j] = ok[i+1][j+1] && items[i].mismatch(outs[j]) == ""
			}
		}
	}
	return ok[0][0]
}

// readmeDiff aligns the documented lines with the output's as closely as
// they go and prints them: "  " for a line that matches (output lines a
// "..." stands for are counted, not shown), "- " for a documented line
// with no match, with why it does not match the output line at that point,
// and "+ " for an output line nothing documented matches.
func readmeDiff(items []readmeItem, outs []readmeOut) string {
	n, m := len(items), len(outs)
	// score[i][j]: the best alignment of items[i:] and outs[j:], a matched
	// line counting 2 and a line a "..." stands for 1.
	score := make([][]int, n+1)
	for i := range score {
		score[i] = make([]int, m+1)
	}
	match := func(i, j int) bool { return !items[i].any && items[i].mismatch(outs[j]) == "" }
	for i := n; i >= 0; i-- {
		for j := m; j >= 0; j-- {
			best := 0
			if i < n {
				best = score[i+1][j]
			}
			if j < m {
				best = max(best, score[i][j+1])
				if i < n && items[i].any {
					best = max(best, 1+score[i][j+1])
				}
				if i < n && match(i, j) {
					best = max(best, 2+score[i+1][j+1])
				}
			}
			score[i][j] = best
		}
	}
	var b strings.Builder
	covered := 0 // output lines a "..." stands for, not yet shown
	flush := func() {
		if covered > 0 {
			fmt.Fprintf(&b, "    (%d line(s) the ... stands for)\n", covered)
			covered = 0
		}
	}
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && match(i, j) && score[i][j] == 2+score[i+1][j+1]:
			flush()
			fmt.Fprintf(&b, "  %s\n", outs[j].shown)
			i, j = i+1, j+1
		case i < n && j < m && items[i].any && score[i][j] == 1+score[i][j+1]:
			covered++
			j++
		case i < n && items[i].any && score[i][j] == score[i+1][j]:
			if covered == 0 {
				fmt.Fprintf(&b, "  ...\n")
			}
			flush()
			i++
		case i < n && !items[i].any && score[i][j] == score[i+1][j]:
			flush()
			fmt.Fprintf(&b, "- %s\n", items[i].shown)
			if j < m {
				fmt.Fprintf(&b, "    (against the output line below: %s)\n", items[i].mismatch(outs[j]))
			} else {
				fmt.Fprintf(&b, "    (the output has no more lines)\n")
			}
			i++
		default:
			flush()
			fmt.Fprintf(&b, "+ %s\n", outs[j].shown)
			j++
		}
	}
	flush()
	return b.String()
}

// globMatch says whether s matches pattern, in which "..." stands for any
// text.
func globMatch(pattern, s string) bool {
	// "... x ..." at the ends of a line: the spaces go with the dots.
	if rest, ok := strings.CutPrefix(pattern, "... "); ok {
		pattern = "..." + rest
	}
	if rest, ok := strings.CutSuffix(pattern, " ..."); ok {
		pattern = rest + "..."
	}
	parts := strings.Split(pattern, "...")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		k := strings.Index(s, p)
		if k < 0 {
			return false
		}
		s = s[k+len(p):]
	}
	return strings.HasSuffix(s, last)
}

// jsonPat is a documented JSON value: JSON in which "..." may stand for
// more members of an object, more elements of an array, or any text within
// a string.
type jsonPat struct {
	kind  byte // '{' object, '[' array, '"' string, '0' number, 't' boolean, 'n' null
	keys  []string
	vals  []*jsonPat
	elems []*jsonPat
	dots  int // for an array: the index of its "..." among the elements, or -1
	str   string
	num   string
	b     bool
}

func parseJSONPat(s string) (*jsonPat, error) {
	p := &jsonPatParser{s: s}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("text after the value: %q", p.s[p.i:])
	}
	return v, nil
}

type jsonPatParser struct {
	s string
	i int
}

func (p *jsonPatParser) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *jsonPatParser) peek(prefix string) bool {
	p.ws()
	if strings.HasPrefix(p.s[p.i:], prefix) {
		p.i += len(prefix)
		return true
	}
	return false
}

func (p *jsonPatParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at %q: %s", p.s[p.i:min(p.i+20, len(p.s))], fmt.Sprintf(format, args...))
}

func (p *jsonPatParser) value() (*jsonPat, error) {
	p.ws()
	switch {
	case p.i >= len(p.s):
		return nil, errors.New("the JSON ends early")
	case p.s[p.i] == '{':
		return p.object()
	case p.s[p.i] == '[':
		return p.array()
	case p.s[p.i] == '"':
		s, err := p.str()
		return &jsonPat{kind: '"', str: s}, err
	case p.peek("true"):
		return &jsonPat{kind: 't', b: true}, nil
	case p.peek("false"):
		return &jsonPat{kind: 't'}, nil
	case p.peek("null"):
		return &jsonPat{kind: 'n'}, nil
	}
	j := p.i
	for j < len(p.s) && strings.IndexByte("+-.eE0123456789", p.s[j]) >= 0 {
		j++
	}
	if num := p.s[p.i:j]; num != "" && json.Valid([]byte(num)) {
		p.i = j
		return &jsonPat{kind: '0', num: num}, nil
	}
	return nil, p.errorf("want a JSON value")
}

func (p *jsonPatParser) str() (string, error) {
	start := p.i
	for p.i++; p.i < len(p.s); p.i++ {
		switch p.s[p.i] {
		case '\\':
			p.i++
		case '"':
			p.i++
			var s string
			err := json.Unmarshal([]byte(p.s[start:p.i]), &s)
			return s, err
		}
	}
	return "", errors.New("a string is not closed")
}

func (p *jsonPatParser) object() (*jsonPat, error) {
	p.i++
	o := &jsonPat{kind: '{'}
	if p.peek("}") {
		return o, nil
	}
	for {
		if !p.peek("...") {
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				return nil, p.errorf("want a key or ...")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			if !p.peek(":") {
				return nil, p.errorf("want :")
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			o.keys, o.vals = append(o.keys, k), append(o.vals, v)
		}
		switch {
		case p.peek(","):
		case p.peek("}"):
			return o, nil
		default:
			return nil, p.errorf("want , or }")
		}
	}
}

func (p *jsonPatParser) array() (*jsonPat, error) {
	p.i++
	a := &jsonPat{kind: '[', dots: -1}
	if p.peek("]") {
		return a, nil
	}
	for {
		if p.peek("...") {
			if a.dots >= 0 {
				return nil, p.errorf("a second ... in one array")
			}
			a.dots = len(a.elems)
		} else {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			a.elems = append(a.elems, v)
		}
		switch {
		case p.peek(","):
		case p.peek("]"):
			return a, nil
		default:
			return nil, p.errorf("want , or ]")
		}
	}
}

func jsonKind(v any) byte {
	switch v.(type) {
	case map[string]any:
		return '{'
	case []any:
		return '['
	case string:
		return '"'
	case json.Number:
		return '0'
	case bool:
		return 't'
	}
	return 'n'
}

var jsonKindNames = map[byte]string{'{': "an object", '[': "an array", '"': "a string", '0': "a number", 't': "a boolean", 'n': "null"}

func jsonShow(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// match says why v does not match the pattern, naming where (path), or ""
// when it does. key is the member v is the value of.
func (p *jsonPat) match(path, key string, v any) string {
	if jsonKind(v) != p.kind {
		return fmt.Sprintf("%s: documented %s, got %s", path, jsonKindNames[p.kind], jsonShow(v))
	}
	if readmeVolatileKeys[key] {
		return ""
	}
	switch p.kind {
	case '{':
		m := v.(map[string]any)
		for i, k := range p.keys {
			got, ok := m[k]
			if !ok {
				return fmt.Sprintf("%s: no key %q", path, k)
			}
			if why := p.vals[i].match(path+"."+k, k, got); why != "" {
				return why
			}
		}
	case '[':
		a := v.([]any)
		before, after := p.elems, []*jsonPat(nil)
		if p.dots >= 0 {
			before, after = p.elems[:p.dots], p.elems[p.dots:]
		}
		if p.dots < 0 && len(a) != len(p.elems) || len(a) < len(before)+len(after) {
			return fmt.Sprintf("%s: documented %d element(s), got %d", path, len(p.elems), len(a))
		}
		for i, e := range before {
			if why := e.match(fmt.Sprintf("%s[%d]", path, i), "", a[i]); why != "" {
				return why
			}
		}
		for i, e := range after {
			k := len(a) - len(after) + i
			if why := e.match(fmt.Sprintf("%s[%d]", path, k), "", a[k]); why != "" {
				return why
			}
		}
	case '"':
		if !globMatch(normaliseText(p.str), normaliseText(v.(string))) {
			return fmt.Sprintf("%s: documented %q, got %q", path, p.str, v)
		}
	case '0':
		if v.(json.Number).String() != p.num {
			return fmt.Sprintf("%s: documented %s, got %s", path, p.num, v)
		}
	case 't':
		if v.(bool) != p.b {
			return fmt.Sprintf("%s: documented %t, got %t", path, p.b, v)
		}
	}
	return ""
}

// TestREADMEAnswerMatching checks the comparison rules above, one case each.
func TestREADMEAnswerMatching(t *testing.T) {
	cases := []struct {
		name   string
		doc    []string
		out    string
		stream bool
		match  bool
	}{
		{"same text", []string{"Paused mirroring for 1 topic(s): [orders]"}, "Paused mirroring for 1 topic(s): [orders]\n", false, true},
		{"other text", []string{"Paused mirroring for 1 topic(s): [orders]"}, "Paused mirroring for 2 topic(s): [orders, payments]\n", false, false},
		{"more lines than documented", []string{"Deleted mirror m."}, "Deleted mirror m.\nand more\n", false, false},
		{"... for more lines", []string{"Deleted mirror m.", "..."}, "Deleted mirror m.\nand more\nand more\n", false, true},
		{"... within a line", []string{"... write topics PASS allowed on all 1 ...", "Result: PASS"},
			"Checks:\ndestination  write topics   PASS  allowed on all 1\nother\n\nResult: PASS\n", false, true},
		{"blank lines and spaces", []string{"a b"}, "\n  a    b  \n\n", false, true},
		{"durations and times", []string{"All partitions are STOPPED (after 500ms).", "Last sync of demo: 2025-01-02T03:04:05.123Z (6 ms, request)"},
			"All partitions are STOPPED (after 1m2.5s).\nLast sync of demo: 2026-12-06T21:07:11.2Z (12 ms, request)\n", false, true},
		{"JSON subset", []string{`{"mirror":"m","topics":["a"]}`}, `{"topics":["a"],"mirror":"m","action":"add"}` + "\n", false, true},
		{"JSON value differs", []string{`{"mirror":"m","topics":["a"]}`}, `{"mirror":"m","topics":["b"]}` + "\n", false, false},
		{"JSON key missing", []string{`{"mirror":"m","wait":{}}`}, `{"mirror":"m"}` + "\n", false, false},
		{"JSON array length", []string{`{"topics":["a"]}`}, `{"topics":["a","b"]}` + "\n", false, false},
		{"JSON ... in arrays, objects and strings", []string{`{"partitions":[{"topic":"orders",...},...],"next_cursor":"eyJtIjoi..."}`},
			`{"partitions":[{"topic":"orders","partition":0},{"topic":"orders","partition":1}],"next_cursor":"eyJtIjoiZGVtbyJ9"}` + "\n", false, true},
		{"JSON wrapped over lines", []string{`{"a":1,`, `  "b":[2,`, `   3]}`}, `{"a":1,"b":[2,3]}` + "\n", false, true},
		{"volatile keys take any value of their type", []string{`{"waited_ms":41,"lag":0,"owner":"host-1"}`}, `{"waited_ms":3,"lag":7,"owner":"dev"}` + "\n", false, true},
		{"volatile keys keep their type", []string{`{"lag":0}`}, `{"lag":null}` + "\n", false, false},
		{"table columns that move", []string{
			"MIRROR   TOPIC    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE",
			"demo     orders   0          11              11                 0        MIRRORING"},
			"MIRROR                         TOPIC     PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE       \n" +
				"demo                           orders    0          12345           12340              5        MIRRORING   \n", false, true},
		{"table columns that do not move", []string{
			"MIRROR   TOPIC    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE",
			"demo     orders   0          11              11                 0        MIRRORING"},
			"MIRROR   TOPIC    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE\n" +
				"demo     orders   1          11              11                 0        PAUSED\n", false, false},
		{"a line after a table is not a row", []string{
			"MIRROR     STATE        LAG      NEWEST-NOT-COPIED",
			"my-mirror  MIRRORING    2        2026-01-15T10:04:06.157Z",
			"Removing would leave 2 record(s) of 1 topic(s) behind; nothing was changed (dry run)."},
			"MIRROR     STATE        LAG      NEWEST-NOT-COPIED\n" +
				"my-mirror  MIRRORING    0        -\n" +
				"Removing would leave no record behind; nothing was changed (dry run).\n", false, true},
		{"failover preview counts", []string{"Removing would leave 1 record(s) of 1 topic(s) behind; nothing was changed (dry run)."},
			"Removing would leave no record behind; nothing was changed (dry run).\n", false, true},
		{"failover preview's oldest", []string{"Removing would leave 1 record(s) of 1 topic(s) behind (the oldest 0.4s old); nothing was changed (dry run)."},
			"Removing would leave 3 record(s) of 1 topic(s) behind (the oldest 2m5s old); nothing was changed (dry run).\n", false, true},
		{"a stream's answer anywhere", []string{"id: 57", "event: partition.state", `data: {"id":57,"message":"orders/0: resumed",`, `       "data":{"epoch":3}}`},
			"id: 1\nevent: mirror.created\ndata: {\"id\":1}\n\nid: 9\nevent: partition.state\ndata: {\"id\":9,\"message\":\"orders/0: resumed\",\"data\":{\"epoch\":1}}\n\nid: 10\n", true, true},
		{"a stream without it", []string{"id: 57", "event: partition.state"}, "id: 1\nevent: mirror.created\n", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			diff, err := compareREADMEAnswer(c.doc, c.out, c.stream)
			if err != nil {
				t.Fatal(err)
			}
			if (diff == "") != c.match {
				t.Errorf("match %t, want %t; diff:\n%s", diff == "", c.match, diff)
			}
			if !c.match {
				t.Logf("diff:\n%s", diff)
			}
		})
	}
}
