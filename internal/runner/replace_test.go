package runner

import (
	"context"
	"errors"
	"testing"
)

// TestResourceAddress: what a module's member_addresses output may name
// is a managed resource (instance), in the module or a module it calls.
func TestResourceAddress(t *testing.T) {
	for a, want := range map[string]bool{
		`aws_instance.node`:                         true,
		`aws_instance.node[0]`:                      true,
		`captftest_file.member["a"]`:                true,
		`module.nodes.aws_instance.this[2]`:         true,
		`module.nodes["x"].module.y.aws_instance.z`: true,
		`data.aws_ami.ubuntu`:                       false,
		`module.nodes`:                              false,
		`aws_instance`:                              false,
		`aws_instance.node[0][1]`:                   false,
		`aws_instance.node -destroy`:                false,
		`-destroy`:                                  false,
		``:                                          false,
		"aws_instance.node\n-auto-approve":          false,
	} {
		if got := resourceAddress(a); got != want {
			t.Errorf("resourceAddress(%q) = %v, want %v", a, got, want)
		}
	}
}

// TestReplaceMemberRefused: --replace-member goes with a plan or an apply
// only, and names a member; anything else is bad input before any step.
func TestReplaceMemberRefused(t *testing.T) {
	for _, j := range []Job{
		{Operation: "drift", ReplaceMembers: []string{"aws:///z/i-1"}},
		{Operation: "destroy", ReplaceMembers: []string{"aws:///z/i-1"}},
		{Operation: "apply", Guard: true, AppliedInputs: "/x", Unapproved: []string{"b"}, ReplaceMembers: []string{"aws:///z/i-1"}},
		{Operation: "plan", ReplaceMembers: []string{""}},
	} {
		msg, err := j.run(context.Background(), nil)
		if !errors.Is(err, ErrBadInput) {
			t.Errorf("%s with --replace-member %q: %v (%+v), want bad input", j.Operation, j.ReplaceMembers, err, msg)
		}
	}
}
