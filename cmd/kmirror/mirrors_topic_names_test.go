package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestMirrorsShowDestinationNames: a mirror with topic.name.prefix east.
// shows each topic as "my-topic → east.my-topic" where it names one (an
// add and its dry run, --wait's progress, describe, a remove's preview,
// pause, resume and remove);
// an unprefixed mirror's topics print as they always have.
func TestMirrorsShowDestinationNames(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror east.\n", "--create", "--mirror", "east", "--source-bootstrap", e.source,
		"--config", "topic.name.prefix=east.")
	e.mustMirrors(t, "Created mirror plain.\n", "--create", "--mirror", "plain", "--source-bootstrap", e.source)

	e.mustMirrors(t, "Adding would start mirroring 1 topic(s) in mirror east: [my-topic → east.my-topic]; nothing was changed (dry run).\n",
		"--add", "--dry-run", "--mirror", "east", "--topic", "my-topic")
	code, out, errOut := e.mirrors(t, "--add", "--mirror", "east", "--topic", "my-topic", "--wait", "300ms")
	if want := "Added 1 topic(s) to mirror east: [my-topic → east.my-topic]\nmy-topic → east.my-topic: 0/3 partitions MIRRORING\n"; code != 3 || out != want ||
		!strings.Contains(errOut, "(my-topic → east.my-topic 0/3)") {
		t.Fatalf("add --wait: exit %d, stdout %q, stderr %q; want exit 3 and stdout %q", code, out, errOut, want)
	}
	e.mustMirrors(t, "Added 1 topic(s) to mirror plain: [other-topic]\n", "--add", "--mirror", "plain", "--topic", "other-topic")

	code, out, errOut = e.mirrors(t, "--describe")
	want := describeHeader + "\n"
	for p := range 3 {
		want += fmt.Sprintf(describeFormat, "east", "my-topic → east.my-topic", fmt.Sprint(p), "-", "-", "-", "UNKNOWN", "-")
	}
	want += fmt.Sprintf(describeFormat, "plain", "other-topic", "0", "-", "-", "-", "UNKNOWN", "-")
	if code != 0 || out != want {
		t.Fatalf("describe: exit %d (%s)\n%s\nwant\n%s", code, errOut, out, want)
	}

	code, out, errOut = e.mirrors(t, "--remove", "--dry-run", "--mirror", "east", "--topic", "my-topic")
	if row := fmt.Sprintf(failoverFormat, "east", "my-topic → east.my-topic", "0", "UNKNOWN", "0", "-"); code != 0 || !strings.Contains(out, row) {
		t.Fatalf("remove --dry-run: exit %d (%s)\n%s\nwant a row %q", code, errOut, out, row)
	}

	e.mustMirrors(t, "Paused mirroring for 1 topic(s): [my-topic → east.my-topic]\n", "--pause", "--mirror", "east", "--topic", "my-topic")
	e.mustMirrors(t, "Resumed mirroring for 1 topic(s): [my-topic → east.my-topic]\n", "--resume", "--mirror", "east", "--topic", "my-topic")
	e.mustMirrors(t, "Paused mirroring for 1 topic(s): [other-topic]\n", "--pause", "--mirror", "plain", "--topic", "other-topic")
	e.mustMirrors(t, "Removed 1 topic(s) from mirror east: [my-topic → east.my-topic]\n", "--remove", "--mirror", "east", "--topic", "my-topic")
}
