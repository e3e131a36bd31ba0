// Package e2e holds end-to-end tests that run the real kmirror binary as
// child processes against in-process kfake clusters and a throw-away
// Postgres: crash safety (SIGKILL at random moments) and the exactly-once
// guarantee of docs/design.md ("The copy"). It has no non-test code besides this
// comment.
package e2e
