// Command probe stands in a module image at /captf/runtime/terraform: on
// plan and apply it writes to its standard error (the pod's log) what the
// runner container sees of itself — its user and groups, whether the root
// filesystem takes a write, the mode of the mounted plan key and how many
// bytes it could read of it (never the bytes), its capabilities and
// no_new_privs, and the image's marker file — and then becomes the real
// terraform of the image (/captf/runtime/real/terraform), with the same
// arguments and environment.
//
// With the image file /captf/slow-apply, an apply first sleeps for that
// many seconds, ignoring SIGTERM, as a terraform still busy when its pod
// is deleted would.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const real = "/captf/runtime/real/terraform"

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "plan" || os.Args[1] == "apply") {
		fmt.Fprintln(os.Stderr, report(os.Args[1]))
		if os.Args[1] == "apply" {
			slow()
		}
	}
	err := syscall.Exec(real, append([]string{real}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "probe: exec %s: %v\n", real, err)
	os.Exit(1)
}

func report(op string) string {
	rootfs := "writable"
	if err := os.WriteFile("/probe-write-test", []byte("x"), 0o644); errors.Is(err, syscall.EROFS) {
		rootfs = "read-only"
	} else if err != nil {
		rootfs = "unwritable: " + err.Error()
	} else {
		_ = os.Remove("/probe-write-test")
	}
	key := "absent"
	if fi, err := os.Stat("/captf/plan-key/key"); err == nil {
		b, rerr := os.ReadFile("/captf/plan-key/key")
		key = fmt.Sprintf("%04o/read %d bytes", fi.Mode().Perm(), len(b))
		if rerr != nil {
			key = fmt.Sprintf("%04o/unreadable", fi.Mode().Perm())
		}
	}
	marker, _ := os.ReadFile("/captf/marker")
	groups, _ := os.Getgroups()
	return fmt.Sprintf("captf-probe: op=%s uid=%d gid=%d groups=%v rootfs=%s plan-key=%s CapEff=%s NoNewPrivs=%s marker=%s",
		op, os.Getuid(), os.Getgid(), groups, rootfs, key, status("CapEff"), status("NoNewPrivs"), strings.TrimSpace(string(marker)))
}

// status is a field of /proc/self/status.
func status(field string) string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "?"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func slow() {
	b, err := os.ReadFile("/captf/slow-apply")
	if err != nil {
		return
	}
	secs, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	fmt.Fprintf(os.Stderr, "captf-probe: apply sleeps %ds\n", secs)
	time.Sleep(time.Duration(secs) * time.Second)
}
