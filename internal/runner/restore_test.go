package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tfstate"
	"github.com/captf/captf/internal/tftest"
)

const canaryState = "CANARY-RESTORE-STATE-3d9e"

// TestJobRestore applies a module whose state lives in the kubernetes
// backend of a real API server, backs the state up from its Secrets with
// tfstate, deletes the Secrets, and restores the backup with a restore
// Job. The restored state is the backup byte for byte but for its serial,
// which terraform's push -force counts up by one. A corrupt or incomplete
// backup pushes nothing.
func TestJobRestore(t *testing.T) {
	env := testenv.Start(t, "../..")
	t.Setenv("KUBE_CONFIG_PATH", env.Kubeconfig(t))
	t.Setenv("KUBE_IN_CLUSTER_CONFIG", "false")
	for _, kv := range tftest.Env(t) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	terraform, tofu := tftest.Terraform(t), tftest.Tofu(t)
	cases := []struct {
		name string
		bin  tftest.Binary
		// blob random bytes, base64'ed into the state twice.
		blob   int
		chunks int
		// corrupt makes a bad backup from a good one's files.
		corrupt func(t *testing.T, dir string)
		wantErr string
		// unchecked: the bad backup's Job gets no digests (a restore
		// without them still checks gzip and JSON).
		unchecked bool
	}{
		{
			// More than 1 MiB compressed: terraform splits it.
			name: "terraform chunked", bin: terraform, blob: 1_000_000, chunks: 2,
			corrupt: func(t *testing.T, dir string) { remove(t, filepath.Join(dir, "chunk-0")) },
			wantErr: "backup: missing chunk: chunk-0 is missing, chunk-1 is there",
		},
		{
			// Just under 1 MiB compressed: one Secret, as tofu must.
			name: "tofu single", bin: tofu, blob: 450_000, chunks: 1,
			corrupt: func(t *testing.T, dir string) { flip(t, filepath.Join(dir, "chunk-0"), 500_000) },
			wantErr: "backup: corrupt state: chunk-0 does not match its digest",
		},
		{
			name: "terraform single", bin: terraform, blob: 450_000, chunks: 1,
			corrupt: func(t *testing.T, dir string) {
				b, err := os.ReadFile(filepath.Join(dir, "chunk-0"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "chunk-0"), b[:len(b)-100], 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantErr:   "backup: corrupt state: chunk-0: the state does not decompress: unexpected EOF",
			unchecked: true,
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			suffix := "captf-tfc-restore-" + strconv.Itoa(i) + "x"
			f := newRestoreFixture(t, tc.bin)

			// Apply: the state is written by the backend.
			blob := make([]byte, tc.blob)
			rand.Read(blob)
			value, _ := json.Marshal(canaryState + base64.StdEncoding.EncodeToString(blob))
			root, err := render.Render(bytes.Repeat([]byte{7}, 32), render.Request{StateSuffix: suffix, Namespace: "default",
				Variables: map[string]render.Variable{"blob": {Value: value, Sensitive: true}}})
			if err != nil {
				t.Fatal(err)
			}
			f.inputs(t, "apply", root.MainTF, root.Vars)
			if code, m, log := f.run(t, "apply", ""); code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("apply: exit %d, %+v\n%s", code, m, log)
			}

			// Back up from the Secrets, as the manager would: the chunks as
			// stored, and their digests.
			stored, err := tfstate.Chunks(suffix, stateSecrets(t, env.Client, suffix))
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != tc.chunks {
				t.Fatalf("%d chunks, want %d", len(stored), tc.chunks)
			}
			meta, err := tfstate.Check(stored)
			if err != nil {
				t.Fatal(err)
			}
			before := tftest.StateJSON(t, stored)
			if err := env.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace("default"), client.MatchingLabels(tfstate.Selector(suffix))); err != nil {
				t.Fatal(err)
			}
			if n := len(stateSecrets(t, env.Client, suffix)); n != 0 {
				t.Fatalf("%d state Secrets left", n)
			}

			// The restore Job's inputs: the backend alone, no variables, the
			// backup's data as files.
			mainTF, err := render.BackendRoot("default", suffix)
			if err != nil {
				t.Fatal(err)
			}
			backupDir := f.inputs(t, "restore", mainTF, []byte("{}"))
			writeBackup := func() {
				os.RemoveAll(backupDir)
				if err := os.MkdirAll(backupDir, 0o755); err != nil {
					t.Fatal(err)
				}
				for n, v := range stored {
					if err := os.WriteFile(filepath.Join(backupDir, tfstate.ChunkKey(n)), v, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			digests := tfstate.Digests(stored)

			// A bad backup: bad input, named by chunk, and nothing pushed.
			writeBackup()
			tc.corrupt(t, backupDir)
			badDigests := digests
			if tc.unchecked {
				badDigests = ""
			}
			code, m, log := f.run(t, "restore", badDigests)
			if code != ExitBadInput || m.Outcome != OutcomeBadInput || m.Restored != nil || !strings.HasSuffix(m.Error, tc.wantErr) {
				t.Fatalf("bad backup: exit %d, %+v, want an error ending %q\n%s", code, m, tc.wantErr, log)
			}
			if n := len(stateSecrets(t, env.Client, suffix)); n != 0 {
				t.Fatalf("a bad backup pushed: %d state Secrets", n)
			}

			// The backup restored.
			writeBackup()
			code, m, log = f.run(t, "restore", digests)
			want := Restored{Serial: meta.Serial, StateSerial: meta.Serial + 1, Resources: 3}
			if code != 0 || m.Outcome != OutcomeRestored || m.Restored == nil || *m.Restored != want {
				t.Fatalf("restore: exit %d, %+v, want %+v\n%s", code, m, want, log)
			}
			if strings.Contains(log, canaryState) {
				t.Error("the restore Job's log holds a state value")
			}
			chunks, err := tfstate.Chunks(suffix, stateSecrets(t, env.Client, suffix))
			if err != nil {
				t.Fatal(err)
			}
			if len(chunks) != tc.chunks {
				t.Errorf("restored in %d chunks, want %d", len(chunks), tc.chunks)
			}
			after := tftest.StateJSON(t, chunks)
			// The one difference: push -force writes serial+1.
			wantAfter := tftest.WithSerial(t, before, meta.Serial+1)
			if !bytes.Equal(after, wantAfter) {
				t.Errorf("the restored state (%d bytes) is not the backup (%d bytes) with serial %d", len(after), len(before), meta.Serial+1)
			}
			var lease coordinationv1.Lease
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: tfstate.LeaseName(suffix)}, &lease); err != nil {
				t.Fatal(err)
			}
			if lease.Spec.HolderIdentity != nil || lease.Annotations[tfstate.AnnotationLockInfo] != "" {
				t.Errorf("the restore left the state locked: %+v", lease.Spec)
			}
		})
	}
}

// restoreFixture is what a runner Job's pod mounts, one inputs folder per
// operation, and the module of the restore tests.
type restoreFixture struct {
	root, runtime, module string
}

func newRestoreFixture(t *testing.T, bin tftest.Binary) *restoreFixture {
	f := &restoreFixture{root: t.TempDir()}
	f.runtime = filepath.Join(f.root, "runtime")
	if err := os.MkdirAll(f.runtime, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin.Path, filepath.Join(f.runtime, bin.Name)); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.module, err = filepath.Abs("testdata/restore-module"); err != nil {
		t.Fatal(err)
	}
	return f
}

// inputs writes the inputs of op and returns its backup folder.
func (f *restoreFixture) inputs(t *testing.T, op string, mainTF, vars []byte) string {
	dir := filepath.Join(f.root, op, "inputs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf.json"), mainTF, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "terraform.tfvars.json"), vars, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, BackupDir)
}

// run runs a Job of op in a fresh work folder, as each Job's pod does.
func (f *restoreFixture) run(t *testing.T, op, digests string) (int, Message, string) {
	t.Helper()
	var out lockedBuffer
	work, err := os.MkdirTemp(f.root, "work-")
	if err != nil {
		t.Fatal(err)
	}
	message := filepath.Join(work, "termination-log")
	j := &Job{Operation: op, Inputs: filepath.Join(f.root, op, "inputs"), Module: f.module, Workdir: filepath.Join(work, "root"),
		Runtime: f.runtime, KeyFile: filepath.Join(f.root, "no-key"), BackupDigests: digests, MessagePath: message, Stdout: &out, Stderr: &out}
	if op == "restore" {
		j.Module = ""
	}
	code := j.Run(context.Background())
	raw, err := os.ReadFile(message)
	if err != nil {
		t.Fatalf("no report: %v", err)
	}
	if bytes.Contains(raw, []byte(canaryState)) {
		t.Fatalf("the report holds a value: %.200s", raw)
	}
	var m Message
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("report %.200s: %v", raw, err)
	}
	return code, m, out.String()
}

func stateSecrets(t *testing.T, c client.Client, suffix string) []tfstate.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := c.List(context.Background(), &list, client.InNamespace("default"), client.MatchingLabels(tfstate.Selector(suffix))); err != nil {
		t.Fatal(err)
	}
	var out []tfstate.Secret
	for _, s := range list.Items {
		out = append(out, tfstate.Secret{Name: s.Name, Labels: s.Labels, Annotations: s.Annotations, Data: s.Data})
	}
	return out
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// flip changes one byte of the file at path at offset.
func flip(t *testing.T, path string, offset int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[offset%len(b)] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
