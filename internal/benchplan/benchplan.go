// Package benchplan is what the fingerprint's benchmarks share: plan
// documents shaped like `terraform show -json` of any size (larger than
// terraform can make in a test), and the peak memory of a child process
// that works on one.
package benchplan

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Write writes a plan of n resource changes, sorted by address as terraform
// writes them: a mix of creates, in-place updates, replacements, deletes,
// imports and moves, with unknown and sensitive markers, large integers,
// escapes, and planned_values and prior_state sections to skip.
//
// A non-zero drift gives one update in a hundred (the changes i with
// i%100 == 3) another planned value, the way a plan made later differs from
// the approved one: those changes, and only those, get another digest.
func Write(w io.Writer, n, drift int) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	fmt.Fprint(bw, `{"format_version":"1.2","terraform_version":"1.11.4","variables":{"gen":{"value":2}},"planned_values":{"root_module":{"resources":[`)
	for i := range n / 10 {
		if i > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, `{"address":"terraform_data.r[%d]","mode":"managed","type":"terraform_data","values":{"input":{"name":"r-%d"}}}`, i, i)
	}
	fmt.Fprint(bw, `]}},"resource_changes":[`)
	for i := range n {
		if i > 0 {
			bw.WriteByte(',')
		}
		// Addresses in the order terraform writes them: sorted.
		head := fmt.Sprintf(`{"address":"module.m%02d.terraform_data.r[\"k%06d\"]","module_address":"module.m%02d","mode":"managed","type":"terraform_data","name":"r","index":"k%06d","provider_name":"terraform.io/builtin/terraform",`, i/2000, i, i/2000, i)
		bw.WriteString(head)
		switch i % 10 {
		case 0, 1, 2:
			fmt.Fprintf(bw, `"change":{"actions":["create"],"before":null,"after":{"input":{"big":1844674407370955%04d,"name":"r-%d","note":"line\nbreak \u00e9","size":%d},"triggers_replace":null},"after_unknown":{"id":true,"input":{},"output":true},"before_sensitive":false,"after_sensitive":{"input":{"note":true},"output":{}}}}`, i%10000, i, i*7)
		case 3, 4, 5, 6:
			gen := 2
			if i%100 == 3 {
				gen += drift
			}
			fmt.Fprintf(bw, `"change":{"actions":["update"],"before":{"id":"id-%08d","input":{"gen":1,"name":"r-%d","ports":[80,443,%d]},"triggers_replace":0},"after":{"id":"id-%08d","input":{"gen":%d,"name":"r-%d","ports":[80,443,%d]},"triggers_replace":0},"after_unknown":{"input":{"ports":[false,false,false]},"output":true},"before_sensitive":{"input":{"ports":[false,false,false]}},"after_sensitive":{"input":{}}}}`, i, i, 8000+i%1000, i, gen, i, 8000+i%1000)
		case 7:
			fmt.Fprintf(bw, `"change":{"actions":["delete","create"],"before":{"id":"id-%08d","input":"x","triggers_replace":1},"after":{"input":"x","triggers_replace":2},"after_unknown":{"id":true,"output":true},"before_sensitive":{},"after_sensitive":{}},"action_reason":"replace_because_cannot_update"}`, i)
		case 8:
			fmt.Fprintf(bw, `"change":{"actions":["delete"],"before":{"id":"id-%08d","input":"gone"},"after":null,"after_unknown":{},"before_sensitive":{},"after_sensitive":false}}`, i)
		default:
			fmt.Fprintf(bw, `"previous_address":"terraform_data.old[%d]","change":{"actions":["no-op"],"before":{"id":"id-%08d"},"after":{"id":"id-%08d"},"after_unknown":{},"before_sensitive":{},"after_sensitive":{},"importing":{"id":"imp-%d"}}}`, i, i, i, i)
		}
	}
	fmt.Fprint(bw, `],"output_changes":{"count":{"actions":["update"],"before":1,"after":2,"after_unknown":false,"before_sensitive":false,"after_sensitive":false}},"prior_state":{"format_version":"1.0","values":{"root_module":{"resources":[`)
	for i := range n / 10 {
		if i > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, `{"address":"terraform_data.r[%d]","values":{"id":"id-%08d","input":{"name":"r-%d","esc":"q\"uote\\"}}}`, i, i, i)
	}
	fmt.Fprint(bw, `]}}},"configuration":{"root_module":{}},"timestamp":"2026-11-29T00:00:00Z","applyable":true,"complete":true,"errored":false}`)
	return bw.Flush()
}

// PeakEnv names the variable that makes a test binary the child of
// PeakMemory: its TestMain sees it set and runs the measured work instead
// of the tests.
const PeakEnv = "CAPTF_PEAK_CHILD"

// PeakMemory runs this test binary again as a fresh process with env (and
// PeakEnv set to child) and returns what the child printed before its peak
// memory, and that peak (VmHWM) in MB. The child reports its own
// high-water mark with Report: the rusage of a child would also count the
// parent's pages it shared before exec.
func PeakMemory(tb testing.TB, child string, env ...string) (fields []string, peakMB float64) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), PeakEnv+"="+child), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		tb.Fatalf("peak-memory child %s: %v: %s", child, err, stderr)
	}
	fields = strings.Fields(string(out))
	if len(fields) == 0 {
		tb.Fatalf("peak-memory child %s printed nothing", child)
	}
	kb, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil || kb <= 0 {
		tb.Fatalf("peak-memory child %s: output %q does not end in its peak memory", child, out)
	}
	return fields[:len(fields)-1], float64(kb) / 1024
}

// Report prints fields and this process's peak resident memory in kB, the
// way PeakMemory reads them, and exits.
func Report(fields ...any) {
	kb, err := highWaterKB()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(append(fields, kb)...)
	os.Exit(0)
}

// Fail prints err and makes the child exit with a failure.
func Fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// highWaterKB is this process's peak resident memory (VmHWM) in kB.
func highWaterKB() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("peak memory: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peak memory: VmHWM: %w", err)
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("peak memory: no VmHWM in /proc/self/status")
}
