//go:build !race

package recordbatch_test

const raceEnabled = false
