package terraformmachinepool

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/tfstate"
)

// bigState is a gzipped terraform state (one chunk) of a pool with n
// members: its provider_ids output lists them, and each member is a
// resource with an attribute of pad bytes, as a cloud's instance carries
// its launch data. It returns the chunks and the decompressed size.
func bigState(t testing.TB, n, pad int) ([][]byte, int) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	size := 0
	write := func(s string) {
		size += len(s)
		if _, err := zw.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"version":4,"terraform_version":"1.14.0","serial":7,"lineage":"l-1","outputs":{"provider_ids":{"value":[`)
	for i := range n {
		if i > 0 {
			write(",")
		}
		write(fmt.Sprintf(`"aws:///us-east-1a/i-%017d"`, n-i))
	}
	write(`],"type":["list","string"]}},"resources":[`)
	data := strings.Repeat("x", pad)
	for i := range n {
		if i > 0 {
			write(",")
		}
		write(fmt.Sprintf(`{"mode":"managed","type":"aws_instance","name":"member","index_key":%d,"instances":[{"attributes":{"id":"i-%017d","user_data":"%s"}}]}`, i, n-i, data))
	}
	write(`],"check_results":null}`)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return [][]byte{buf.Bytes()}, size
}

// readFrom is the output reader the engine hands FromState: the root
// outputs of the state of chunks, read in one pass when first asked for.
func readFrom(chunks [][]byte) func(string) (tfstate.Output, error) {
	return tfstate.OutputsOf(chunks)
}

// TestMembersFromABigState: a pool of 10,000 members whose state is 40
// times the list's size publishes every member, and reading them takes
// memory of the order of the list, not of the state: the state is never
// held decompressed, and its resources are never read.
func TestMembersFromABigState(t *testing.T) {
	chunks, size := bigState(t, infrav1.MaxProviderIDs, 1500)
	read := readFrom(chunks)
	var before, after runtime.MemStats
	p := &infrav1.TerraformMachinePool{}
	runtime.GC()
	runtime.ReadMemStats(&before)
	steps := Kind.FromState(p, read)
	runtime.ReadMemStats(&after)
	if c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionMembersPublished); c == nil || c.Reason != infrav1.ReasonMembersPublished {
		t.Fatalf("MembersPublished %+v", c)
	}
	if len(steps) != 1 || len(steps[0].(publishMembers).IDs) != infrav1.MaxProviderIDs || p.Status.Replicas != infrav1.MaxProviderIDs {
		t.Fatalf("%d steps, replicas %d; want every member published", len(steps), p.Status.Replicas)
	}
	ids := steps[0].(publishMembers).IDs
	if ids[0] != "aws:///us-east-1a/i-00000000000000001" || ids[len(ids)-1] != "aws:///us-east-1a/i-00000000000010000" {
		t.Errorf("not sorted: %s … %s", ids[0], ids[len(ids)-1])
	}
	list := infrav1.MaxProviderIDs * len(`"aws:///us-east-1a/i-00000000000000001",`)
	allocated := int(after.TotalAlloc - before.TotalAlloc)
	t.Logf("state %d bytes (%d compressed), list %d bytes, read with %d bytes allocated (%.1f× the list, %.3f× the state)",
		size, len(chunks[0]), list, allocated, float64(allocated)/float64(list), float64(allocated)/float64(size))
	if allocated > 10*list || allocated > size/4 {
		t.Errorf("reading the members allocated %d bytes for a list of %d in a state of %d: more than 10× the list", allocated, list, size)
	}
}

// BenchmarkMembers reads 10,000 members from states of growing size:
// B/op stays that of the list.
func BenchmarkMembers(b *testing.B) {
	for _, pad := range []int{0, 1500, 6000} {
		chunks, size := bigState(b, infrav1.MaxProviderIDs, pad)
		b.Run(fmt.Sprintf("state=%dMB", size>>20), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Kind.FromState(&infrav1.TerraformMachinePool{}, readFrom(chunks))
			}
		})
	}
}
