package pgserver

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// binaries are the server tools Start needs.
type binaries struct {
	initdb string
	pgCtl  string
}

// statStatementsInstalled says whether the server beside these tools has
// the pg_stat_statements module (PostgreSQL's contrib), which Start then
// preloads: benchmarks count statements with it. It looks in ../lib next to
// the binaries (Debian's layout), and in pg_config's library directory when
// pg_config belongs to these binaries (a module of another version would
// stop the server from starting).
func (b binaries) statStatementsInstalled() bool {
	bindir := filepath.Dir(b.pgCtl)
	dirs := []string{filepath.Join(filepath.Dir(bindir), "lib")}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		out, err := exec.Command(pgConfig, "--bindir", "--pkglibdir").Output()
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); err == nil && len(lines) == 2 &&
			filepath.Clean(strings.TrimSpace(lines[0])) == filepath.Clean(bindir) {
			dirs = append(dirs, strings.TrimSpace(lines[1]))
		}
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "pg_stat_statements.so")); err == nil {
			return true
		}
	}
	return false
}

var errNoPostgres = errors.New("no PostgreSQL server binaries (initdb, pg_ctl) found via pg_config, " +
	"/usr/lib/postgresql/*/bin or PATH: install PostgreSQL (e.g. apt-get install postgresql) " +
	"or set KMIRROR_DATABASE_URL to use an existing server")

// findBinaries looks where installs actually put the server tools. pg_config
// alone is not enough: Debian's libpq-dev ships it without the server, so
// every candidate directory must really hold initdb and pg_ctl.
func findBinaries() (binaries, error) {
	var dirs []string
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			dirs = append(dirs, strings.TrimSpace(string(out)))
		}
	}
	dirs = append(dirs, debianBinDirs()...)
	for _, dir := range dirs {
		b := binaries{initdb: filepath.Join(dir, "initdb"), pgCtl: filepath.Join(dir, "pg_ctl")}
		if isExecutable(b.initdb) && isExecutable(b.pgCtl) {
			return b, nil
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	pgCtl, err2 := exec.LookPath("pg_ctl")
	if err1 != nil || err2 != nil {
		return binaries{}, errNoPostgres
	}
	return binaries{initdb: initdb, pgCtl: pgCtl}, nil
}

// debianBinDirs lists /usr/lib/postgresql/<version>/bin, newest version first.
func debianBinDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int {
		va, vb := version(a), version(b)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	})
	return dirs
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
