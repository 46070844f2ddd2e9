// Package gcpemu starts the real Google Cloud emulators that run on the
// machines captf is built on, for the tests of the gcp-apply capability:
// the Pub/Sub emulator and the Spanner emulator (both of the machine
// image's Google Cloud CLI packages), and fake-gcs-server (built from the
// Go module proxy by hack/install-fake-gcs.sh). Each is found through its
// environment variable, which hack/test.sh sets, else at its usual place.
// A missing emulator is an error, which the tests turn into a failure:
// nothing skips.
package gcpemu

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Environment variables naming the emulators' binaries.
const (
	PubSubEnv  = "CAPTF_PUBSUB_EMULATOR"
	SpannerEnv = "CAPTF_SPANNER_EMULATOR"
	GCSEnv     = "CAPTF_FAKE_GCS_SERVER"
)

// Where the Google Cloud CLI's packages (google-cloud-cli-pubsub-emulator,
// google-cloud-cli-spanner-emulator) put the emulators.
const (
	pubSubDefault  = "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
	spannerDefault = "/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator/gateway_main"
)

// Server is a running emulator.
type Server struct {
	// URL is its REST endpoint, http://127.0.0.1:PORT.
	URL  string
	Name string
	cmd  *exec.Cmd
	log  *os.File
}

// StartPubSub starts the Pub/Sub emulator, whose REST API answers
// v1/projects/{p}/topics and subscriptions.
func StartPubSub() (*Server, error) {
	bin, err := find(PubSubEnv, pubSubDefault, "the Pub/Sub emulator (package google-cloud-cli-pubsub-emulator, on the machine image; Java)")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return start("pubsub-emulator", fmt.Sprint(port), "/v1/projects/captf-probe/topics", bin, "--host=127.0.0.1", fmt.Sprintf("--port=%d", port))
}

// StartSpanner starts the Spanner emulator's gateway, whose REST API
// answers v1/projects/{p}/instances.
func StartSpanner() (*Server, error) {
	bin, err := find(SpannerEnv, spannerDefault, "the Spanner emulator (package google-cloud-cli-spanner-emulator, on the machine image)")
	if err != nil {
		return nil, err
	}
	grpc, err := freePort()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return start("spanner-emulator", fmt.Sprint(port), "/v1/projects/captf-probe/instanceConfigs", bin,
		"--hostname", "127.0.0.1", "--grpc_port", fmt.Sprint(grpc), "--http_port", fmt.Sprint(port))
}

// StartGCS starts fake-gcs-server over HTTP with an in-memory backend,
// answering the Cloud Storage JSON API at storage/v1.
func StartGCS() (*Server, error) {
	bin, err := find(GCSEnv, gcsDefault(), "fake-gcs-server (hack/install-fake-gcs.sh builds it)")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return start("fake-gcs-server", fmt.Sprint(port), "/storage/v1/b?project=captf-probe", bin,
		"-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port), "-backend", "memory", "-log-level", "error")
}

// gcsDefault is where hack/install-fake-gcs.sh puts fake-gcs-server.
func gcsDefault() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "captf", "fake-gcs-server", "v1.56.1", "fake-gcs-server")
}

func find(env, fallback, what string) (string, error) {
	if bin := os.Getenv(env); bin != "" {
		return bin, nil
	}
	if fallback != "" {
		if _, err := os.Stat(fallback); err == nil {
			return fallback, nil
		}
	}
	return "", fmt.Errorf("%s not found: set %s to it", what, env)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs bin in a process group of its own (the launchers start
// children: Java, emulator_main) and waits until probe answers 200.
func start(name, port, probe, bin string, args ...string) (*Server, error) {
	log, err := os.CreateTemp("", name+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		os.Remove(log.Name())
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &Server{URL: "http://127.0.0.1:" + port, Name: name, cmd: cmd, log: log}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(s.URL + probe)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
	}
	out, _ := os.ReadFile(log.Name())
	s.Stop()
	return nil, errors.New(name + ": not answering on " + s.URL + " after 60 s: " + lastLines(string(out)))
}

func lastLines(s string) string {
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

// Stop kills the emulator and its children and removes its log.
func (s *Server) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.log.Close()
	os.Remove(s.log.Name())
}
