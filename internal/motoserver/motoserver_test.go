package motoserver

import (
	"net/http"
	"testing"
)

func TestStartStop(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL + "/moto-api/")
	if err != nil {
		s.Stop()
		t.Fatal(err)
	}
	resp.Body.Close()
	s.Stop()
	if resp, err := http.Get(s.URL + "/moto-api/"); err == nil {
		resp.Body.Close()
		t.Errorf("%s still answers after Stop", s.URL)
	}
}
