package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// cmdHealthcheck is the command a container's health check runs (the image has no shell and no
// curl): it asks the service on this host for /readyz and exits 0 when it answers 200.
const cmdHealthcheck = "healthcheck"

// healthcheckTimeout bounds the whole check.
const healthcheckTimeout = 3 * time.Second

// runHealthcheck asks http://127.0.0.1:$PORT/readyz (PORT as the service reads it, 3000 when
// unset) and reports the answer on out; 0 when the service is ready, 1 otherwise.
func runHealthcheck(out io.Writer) int {
	port := os.Getenv("PORT")
	if port == "" {
		port = "3000"
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort("127.0.0.1", port)+"/readyz", nil)
	if err != nil {
		fmt.Fprintln(out, "codeauth healthcheck:", err)
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(out, "codeauth healthcheck: not answering:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(out, "codeauth healthcheck: not ready:", resp.Status)
		return 1
	}
	fmt.Fprintln(out, "codeauth healthcheck: ready")
	return 0
}
