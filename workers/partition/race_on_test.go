//go:build race

package partition_test

// raceEnabled: the race detector shadows every allocation, so what a test
// measures of memory is not kmirror's.
const raceEnabled = true
