package runner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tfstate"
)

// BackupDir is the folder of a restore Job's inputs that holds the backup's
// chunks as the files chunk-<n> (the backup Secret's data, mounted).
const BackupDir = "backup"

// Restored is what a restore Job pushed: the serial of the backup, the
// serial the backend holds now (the backup's + 1 when the backend held
// anything else: terraform's push -force counts its own write), and how
// many resources the restored state holds. No address, no value.
type Restored struct {
	Serial      int64 `json:"serial"`
	StateSerial int64 `json:"stateSerial"`
	Resources   int   `json:"resources"`
}

// restore puts the backup in Inputs/backup back as the backend's state.
// The root module is the backend block alone (render.BackendRoot). The
// chunks are checked whole first (their digests, when the Job was given
// them, then gzip and JSON): a corrupt or incomplete backup is bad input,
// named by chunk, and nothing is pushed. The state is assembled in memory
// and reaches terraform on stdin only.
func (j *Job) restore(ctx context.Context, tf *tfexec.Terraform) (*Restored, error) {
	chunks, err := tfstate.ReadChunkDir(filepath.Join(j.Inputs, BackupDir))
	if err != nil {
		return nil, fmt.Errorf("%w: backup: %w", ErrBadInput, err)
	}
	if j.BackupDigests != "" {
		if err := tfstate.VerifyDigests(chunks, j.BackupDigests); err != nil {
			return nil, fmt.Errorf("%w: backup: %w", ErrBadInput, err)
		}
	}
	meta, err := tfstate.Check(chunks)
	if err != nil {
		return nil, fmt.Errorf("%w: backup: %w", ErrBadInput, err)
	}
	r := &Runner{TF: tf, Progress: tf.Stderr, NoValidate: true}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	state, err := tfstate.Open(chunks)
	if err != nil {
		return nil, fmt.Errorf("%w: backup: %w", ErrBadInput, err)
	}
	if err := tf.StatePush(ctx, state); err != nil {
		return nil, err
	}
	out := &Restored{Serial: meta.Serial}
	err = tf.StatePull(ctx, func(r io.Reader) error {
		m, err := tfstate.ReadMeta(r)
		out.StateSerial = m.Serial
		return err
	})
	if err != nil {
		return out, fmt.Errorf("read the restored state: %w", err)
	}
	err = tf.StateList(ctx, func(r io.Reader) error {
		lines := bufio.NewScanner(r)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			if len(bytes.TrimSpace(lines.Bytes())) > 0 {
				out.Resources++
			}
		}
		return lines.Err()
	})
	if err != nil {
		return out, fmt.Errorf("list the restored state: %w", err)
	}
	return out, nil
}
