//go:build race

package recordbatch_test

// raceEnabled: the race detector shadows every allocation, so what a test
// measures of memory is not kmirror's.
const raceEnabled = true
