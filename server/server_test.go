package server_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"codeauth/config"
	"codeauth/internal/testkit"
	"codeauth/server"
)

// load reads a configuration of an SQLite service in a folder of the test's own.
func load(t *testing.T) config.Config {
	t.Helper()
	env := map[string]string{"DATA_DIR": t.TempDir(), "AUTH_SECRET": testkit.Secret}
	cfg, err := config.Load(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A server built and never started (the job subcommands) closes cleanly, and Close may be called
// again; Serve after Close refuses and releases the listener.
func TestClose_WithoutStart(t *testing.T) {
	cfg := load(t)
	srv, err := server.New(context.Background(), cfg, server.Options{NoSchedule: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := srv.Store.Ready(context.Background()); err == nil {
		t.Fatal("the database is still open after Close")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); err == nil {
		t.Fatal("Serve after Close served")
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("the listener is still open")
	}
}

// Serve answers until Close, then returns; the worker and the database stop with it.
func TestServe_UntilClose(t *testing.T) {
	cfg := load(t)
	srv, err := server.New(context.Background(), cfg, server.Options{NoSchedule: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
}
