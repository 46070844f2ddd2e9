package planlog

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/pkg/fingerprint"
)

func TestWriteRead(t *testing.T) {
	changed := []fingerprint.Attributes{
		{Address: "module.main.terraform_data.worker[0]", Action: "update", Names: []string{"input", "output"}},
		{Address: `aws_s3_object.o["a (update): b"]`, Action: "replace", Names: []string{"key"}},
		{Address: "aws_instance.new", Action: "create", Names: []string{"ami", "instance_type", "tags-all"}},
	}
	var b strings.Builder
	b.WriteString("Plan: 1 to add, 1 to change, 1 to destroy.\n")
	// An earlier section, and terraform's own line that looks like one:
	// only the last section counts.
	if err := Write(&b, changed[:1]); err != nil {
		t.Fatal(err)
	}
	b.WriteString("captf: x (update): y\n")
	if err := Write(&b, changed); err != nil {
		t.Fatal(err)
	}
	b.WriteString("captf-runner: a message after it\n")
	got, err := Read(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(changed, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s\nfrom:\n%s", diff, b.String())
	}

	if got, _ := Read(strings.NewReader("captf: a (update): b\n")); got != nil {
		t.Errorf("without the header: %v", got)
	}
	var empty strings.Builder
	if Write(&empty, nil); empty.Len() != 0 {
		t.Errorf("no change wrote %q", empty.String())
	}
}
