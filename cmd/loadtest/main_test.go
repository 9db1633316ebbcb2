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

// With -postmaster naming a process that is no PostgreSQL server, no process counts.
func TestPostgresCPUOfAnotherPostmasterIsNone(t *testing.T) {
	postmasterPID = os.Getpid()
	defer func() { postmasterPID = 0 }()
	if got := postgresCPU(); got != 0 {
		t.Fatalf("postgresCPU with this test as the postmaster = %v, want 0", got)
	}
}
