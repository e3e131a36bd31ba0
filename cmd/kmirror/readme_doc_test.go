package main

import (
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// readmeBlock is one ```sh block of README.md, split into the commands a
// reader pastes one at a time.
type readmeBlock struct {
	line     int    // the line of its ```sh fence
	section  string // the ## heading it is under
	heading  string // the nearest heading, ## or ###
	commands []readmeCommand
}

// readmeCommand is one command of a block (several lines when it continues
// with a backslash, a quote left open or a for loop) and the answer the
// README documents for it: the comment lines right after it that start with
// "#  " (two spaces), less that prefix. Other comments are prose.
type readmeCommand struct {
	line    int
	text    string
	doc     []string
	docLine int
}

var readmeHeading = regexp.MustCompile(`^(##|###) (.+)$`)

// loadREADME reads the sh blocks of the Markdown file at path, each under
// the headings it sits under.
func loadREADME(t *testing.T, path string) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks           []readmeBlock
		section, heading string
		inFence          bool
		block            *readmeBlock
		body             []string
	)
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		switch {
		case inFence && strings.TrimSpace(line) == "```":
			if block != nil {
				block.commands = splitREADMECommands(t, path, body, block.line+1)
				blocks = append(blocks, *block)
			}
			inFence, block, body = false, nil, nil
		case inFence:
			body = append(body, line)
		case strings.HasPrefix(line, "```"):
			inFence = true
			if strings.TrimSpace(line) == "```sh" {
				block = &readmeBlock{line: n, section: section, heading: heading}
			}
		default:
			if m := readmeHeading.FindStringSubmatch(line); m != nil {
				heading = m[2]
				if m[1] == "##" {
					section = m[2]
				}
			}
		}
	}
	if inFence {
		t.Fatalf("%s: a code block is never closed", path)
	}
	return blocks
}

// splitREADMECommands splits a block's lines, the first of which is line
// first of the file, into commands. A command ends at the first line that
// does not end with a backslash and after which bash -n finds the command
// complete (no quote, loop or brace left open).
func splitREADMECommands(t *testing.T, path string, lines []string, first int) []readmeCommand {
	t.Helper()
	var cmds []readmeCommand
	var open *readmeCommand
	for i, line := range lines {
		n := first + i
		if open != nil {
			open.text += "\n" + line
			if shellComplete(open.text) {
				cmds, open = append(cmds, *open), nil
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
		case strings.HasPrefix(line, "#  "):
			if len(cmds) == 0 {
				t.Errorf("%s:%d: a documented answer (a line starting with \"#  \") with no command before it", path, n)
				continue
			}
			c := &cmds[len(cmds)-1]
			if c.doc == nil {
				c.docLine = n
			}
			c.doc = append(c.doc, line[len("#  "):])
		case strings.HasPrefix(trimmed, "#"): // prose
		default:
			open = &readmeCommand{line: n, text: line}
			if shellComplete(open.text) {
				cmds, open = append(cmds, *open), nil
			}
		}
	}
	if open != nil {
		t.Errorf("%s:%d: a command that does not end within its block (bash -n finds it incomplete):\n%s", path, open.line, open.text)
	}
	return cmds
}

// shellComplete says whether s is whole commands: bash parses it (-n: without
// running it) and its last line does not continue with a backslash.
func shellComplete(s string) bool {
	if strings.HasSuffix(strings.TrimRight(s, " \t"), `\`) {
		return false
	}
	return exec.Command("bash", "--noprofile", "--norc", "-n", "-c", s).Run() == nil
}

// readmeAnswerLines joins a documented answer's lines into logical lines: a
// line that opens JSON ({ or [, or an event stream's "data: {") runs on over
// the lines after it, each less its indentation, until its brackets close,
// so a long answer can be wrapped for reading.
func readmeAnswerLines(doc []string) []string {
	var out []string
	depth := 0
	for _, l := range doc {
		if depth > 0 {
			l = strings.TrimLeft(l, " \t")
			out[len(out)-1] += l
			depth += bracketDepth(l)
			continue
		}
		out = append(out, l)
		if _, js := jsonPart(strings.TrimSpace(l)); js != "" {
			depth = bracketDepth(js)
		}
	}
	return out
}

// jsonPart splits a line into the prefix of an event stream's data field
// and the JSON after it, or returns "" as the JSON when the line does not
// start one.
func jsonPart(line string) (prefix, js string) {
	if rest, ok := strings.CutPrefix(line, "data: "); ok {
		prefix, line = "data: ", rest
	}
	if strings.HasPrefix(line, "{") || strings.HasPrefix(line, "[") {
		return prefix, line
	}
	return "", ""
}

// bracketDepth is how many more brackets s opens than it closes, outside
// strings.
func bracketDepth(s string) int {
	depth, inString := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
	}
	return depth
}

// TestREADMECommandSplitting checks how a block is cut into commands and
// their documented answers.
func TestREADMECommandSplitting(t *testing.T) {
	block := []string{
		`API=http://127.0.0.1:8080`,
		``,
		`# Prose, not an answer.`,
		`curl -s -X POST $API/v1/mirrors \`,
		`  -d '{"name":"second",`,
		`       "config":{}}'`,
		`#  {"name":"second",`,
		`#   "config":{}}`,
		`for a in pause resume; do`,
		`  curl -s $API/$a`,
		`done`,
		`$K --describe   # a comment on the line`,
		`#  MIRROR  TOPIC`,
		`#  ...`,
	}
	cmds := splitREADMECommands(t, "README.md", block, 10)
	want := []readmeCommand{
		{line: 10, text: block[0]},
		{line: 13, text: strings.Join(block[3:6], "\n"), doc: []string{`{"name":"second",`, ` "config":{}}`}, docLine: 16},
		{line: 18, text: strings.Join(block[8:11], "\n")},
		{line: 21, text: block[11], doc: []string{"MIRROR  TOPIC", "..."}, docLine: 22},
	}
	if len(cmds) != len(want) {
		t.Fatalf("got %d commands, want %d: %+v", len(cmds), len(want), cmds)
	}
	for i := range want {
		if !reflect.DeepEqual(cmds[i], want[i]) {
			t.Errorf("command %d:\ngot  %+v\nwant %+v", i, cmds[i], want[i])
		}
	}
	if got := readmeAnswerLines(cmds[1].doc); !reflect.DeepEqual(got, []string{`{"name":"second","config":{}}`}) {
		t.Errorf("the wrapped JSON answer joins into %q", got)
	}
}
