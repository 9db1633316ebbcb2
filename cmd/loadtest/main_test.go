package main

import (
	"os"
	"strconv"
	"testing"
)

// parentOf reads the parent from /proc, which -postmaster uses to tell one PostgreSQL server's
// processes from another's.
func TestParentOf(t *testing.T) {
	if got, want := parentOf(strconv.Itoa(os.Getpid())), os.Getppid(); got != want {
		t.Fatalf("parentOf(self) = %d, want %d", got, want)
	}
	if got := parentOf("0"); got != 0 {
		t.Fatalf("parentOf of no process = %d, want 0", got)
	}
}

// -postmaster counts that process and its children, and nothing else; without it every process
// counts (postgresCPU still keeps to those named postgres).
func TestOfPostmaster(t *testing.T) {
	self, parent := strconv.Itoa(os.Getpid()), strconv.Itoa(os.Getppid())
	defer func() { postmasterPID = 0 }()
	for _, c := range []struct {
		postmaster int
		pid        string
		want       bool
	}{
		{0, self, true},
		{os.Getppid(), self, true},   // a child of the postmaster
		{os.Getppid(), parent, true}, // the postmaster itself
		{os.Getpid(), self, true},    // the postmaster itself
		{os.Getpid(), parent, false}, // the postmaster's parent
		{1 << 30, self, false},       // another server's
	} {
		postmasterPID = c.postmaster
		if got := ofPostmaster(c.pid); got != c.want {
			t.Errorf("-postmaster %d: ofPostmaster(%s) = %v, want %v", c.postmaster, c.pid, got, c.want)
		}
	}
}
