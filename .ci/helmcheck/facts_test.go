package helmcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// repoRoot is the kmirror checkout this module sits in.
const repoRoot = "../.."

// facts are what the chart must agree with, read from kmirror's sources
// rather than written down here, so that a change there fails the check
// until the chart follows.
type facts struct {
	// openRoutes maps a handler (s.healthz) to the path it serves for the
	// routes registered before any authentication (api/server.go).
	openRoutes map[string]string
	// metricsPath is the path of the Prometheus handler (api/server.go).
	metricsPath string
	// serverEnv is every KMIRROR_* name `kmirror server` reads
	// (cmd/kmirror/server*.go).
	serverEnv map[string]bool
	// subcommands are the commands of the kmirror binary (cmd/kmirror/main.go).
	subcommands map[string]bool
	// uid is the image's user (Dockerfile, useradd --uid).
	uid int64
	// defaultShutdown is the server's shutdown budget when
	// KMIRROR_SHUTDOWN_TIMEOUT is unset (cmd/kmirror/shutdown.go), and
	// backstop how long after that budget the server exits whatever is left
	// (cmd/kmirror/server.go, shutdownBackstop).
	defaultShutdown, backstop time.Duration
	// readyTimeout is /readyz's own database ping timeout (api/system.go).
	readyTimeout time.Duration
}

func readRepo(path string) (string, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	return string(b), err
}

var (
	// r.Get("/healthz", s.healthz)
	openRouteRE = regexp.MustCompile(`\br\.Get\("(/[^"]*)",\s*s\.(\w+)\)`)
	metricsRE   = regexp.MustCompile(`\br\.Handle\("(/metrics)"`)
	envRE       = regexp.MustCompile(`"(KMIRROR_[A-Z0-9_]+)"`)
	commandRE   = regexp.MustCompile(`(?m)^\s*case ((?:"[a-z-]+",?\s*)+):`)
	uidRE       = regexp.MustCompile(`useradd\b[^\n]*--uid[ =](\d+)`)
	shutdownRE  = regexp.MustCompile(`defaultShutdownTimeout\s*=\s*(\d+)\s*\*\s*time\.Second`)
	// the backstop is armed at the budget plus backstopAfter (server.go),
	// a constant of shutdown.go
	backstopUseRE = regexp.MustCompile(`shutdownBackstop\([^,]+,\s*cmp\.Or\(cfg\.ShutdownTimeout,\s*defaultShutdownTimeout\)\s*\+\s*backstopAfter`)
	backstopRE    = regexp.MustCompile(`backstopAfter\s*=\s*(\d+)\s*\*\s*time\.(Millisecond|Second)`)
	readyRE       = regexp.MustCompile(`readyTimeout\s*=\s*(\d+)\s*\*\s*time\.Second`)
)

// readFacts reads the facts; a pattern that no longer matches is an error,
// never a silent default.
func readFacts() (*facts, error) {
	f := &facts{openRoutes: map[string]string{}, serverEnv: map[string]bool{}, subcommands: map[string]bool{}}

	server, err := readRepo("api/server.go")
	if err != nil {
		return nil, err
	}
	// Routes registered before the first group or sub-router are outside
	// every authentication middleware.
	open := server
	if i := strings.Index(open, "r.Group("); i >= 0 {
		open = open[:i]
	}
	for _, m := range openRouteRE.FindAllStringSubmatch(open, -1) {
		f.openRoutes[m[2]] = m[1]
	}
	if len(f.openRoutes) == 0 {
		return nil, fmt.Errorf("api/server.go: no r.Get(\"/path\", s.handler) before the first r.Group")
	}
	if m := metricsRE.FindStringSubmatch(server); m != nil {
		f.metricsPath = m[1]
	} else {
		return nil, fmt.Errorf("api/server.go: no r.Handle(\"/metrics\"")
	}

	files, err := filepath.Glob(filepath.Join(repoRoot, "cmd/kmirror/server*.go"))
	if err != nil {
		return nil, err
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for _, m := range envRE.FindAllStringSubmatch(string(b), -1) {
			f.serverEnv[m[1]] = true
		}
	}
	if len(f.serverEnv) == 0 {
		return nil, fmt.Errorf("cmd/kmirror/server*.go: no \"KMIRROR_...\" names")
	}

	main, err := readRepo("cmd/kmirror/main.go")
	if err != nil {
		return nil, err
	}
	for _, m := range commandRE.FindAllStringSubmatch(main, -1) {
		for _, c := range strings.Split(m[1], ",") {
			f.subcommands[strings.Trim(strings.TrimSpace(c), `"`)] = true
		}
	}

	dockerfile, err := readRepo("Dockerfile")
	if err != nil {
		return nil, err
	}
	m := uidRE.FindStringSubmatch(dockerfile)
	if m == nil {
		return nil, fmt.Errorf("Dockerfile: no useradd --uid")
	}
	if f.uid, err = strconv.ParseInt(m[1], 10, 64); err != nil {
		return nil, err
	}

	seconds := func(file, text string, re *regexp.Regexp, what string) (time.Duration, error) {
		m := re.FindStringSubmatch(text)
		if m == nil {
			return 0, fmt.Errorf("%s: cannot find %s (%s)", file, what, re)
		}
		if m[1] == "" {
			return time.Second, nil
		}
		n, err := strconv.Atoi(m[1])
		return time.Duration(n) * time.Second, err
	}
	shutdown, err := readRepo("cmd/kmirror/shutdown.go")
	if err != nil {
		return nil, err
	}
	if f.defaultShutdown, err = seconds("cmd/kmirror/shutdown.go", shutdown, shutdownRE, "defaultShutdownTimeout"); err != nil {
		return nil, err
	}
	serverCmd, err := readRepo("cmd/kmirror/server.go")
	if err != nil {
		return nil, err
	}
	if !backstopUseRE.MatchString(serverCmd) {
		return nil, fmt.Errorf("cmd/kmirror/server.go: cannot find the shutdown backstop (%s)", backstopUseRE)
	}
	m = backstopRE.FindStringSubmatch(shutdown)
	if m == nil {
		return nil, fmt.Errorf("cmd/kmirror/shutdown.go: cannot find backstopAfter (%s)", backstopRE)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return nil, err
	}
	f.backstop = time.Duration(n) * time.Millisecond
	if m[2] == "Second" {
		f.backstop = time.Duration(n) * time.Second
	}
	system, err := readRepo("api/system.go")
	if err != nil {
		return nil, err
	}
	if f.readyTimeout, err = seconds("api/system.go", system, readyRE, "readyTimeout"); err != nil {
		return nil, err
	}
	return f, nil
}
