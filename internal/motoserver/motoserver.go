// Package motoserver starts a real moto_server (moto 5.2.1, on the machine
// image) for tests that talk to CloudFormation. A missing moto_server is an
// error, which the tests turn into a failure: nothing skips.
package motoserver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Server is a running moto_server.
type Server struct {
	// URL is its endpoint, http://127.0.0.1:PORT.
	URL string
	cmd *exec.Cmd
	log *os.File
}

// Env is the environment every test against moto sets: static dummy
// credentials, a region and no shared configuration, so that the AWS SDK
// reaches moto and nothing else. Unset lists what must not be set.
var (
	Env = map[string]string{
		"AWS_ACCESS_KEY_ID":           "testing",
		"AWS_SECRET_ACCESS_KEY":       "testing",
		"AWS_REGION":                  "us-east-1",
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED":   "true",
	}
	Unset = []string{"AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"}
)

// Start starts moto_server ($CAPTF_MOTO_SERVER, else from PATH) on a free
// port of 127.0.0.1 and waits until it answers. Stop it with Stop.
func Start() (*Server, error) {
	bin := os.Getenv("CAPTF_MOTO_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("moto_server"); err != nil {
			return nil, fmt.Errorf("moto_server not found on PATH nor in CAPTF_MOTO_SERVER (moto 5.2.1 is on the machine image; pip install 'moto[server]==5.2.1'): %w", err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	log, err := os.CreateTemp("", "moto-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		os.Remove(log.Name())
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, log: log}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(s.URL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
	}
	s.Stop()
	return nil, errors.New("moto_server: not answering on " + s.URL + " after 60 s")
}

// Stop kills moto_server and its children and removes its log.
func (s *Server) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.log.Close()
	os.Remove(s.log.Name())
}
