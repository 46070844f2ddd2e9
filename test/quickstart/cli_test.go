package quickstart

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/captf/captf/internal/tftest"
)

// cliDoc is the quick start of the command line.
const cliDoc = "../../docs/quickstart.md"

// step is a command of a console block and the output the page shows
// under it.
type step struct {
	command string
	output  []string
	line    int
}

// consoleSteps reads the commands (`$ ` lines) of the ```console blocks
// of a page, each with the lines shown under it.
func consoleSteps(text string) []step {
	var steps []step
	in := false
	for i, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "```console"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && strings.HasPrefix(line, "$ "):
			steps = append(steps, step{command: strings.TrimPrefix(line, "$ "), line: i + 1})
		case in && len(steps) > 0:
			steps[len(steps)-1].output = append(steps[len(steps)-1].output, line)
		}
	}
	return steps
}

var (
	// shownHash is a plan hash as the page shows it, shortened.
	shownHash = regexp.MustCompile(`p2:[0-9a-f]*…[0-9a-f]*`)
	// fullHash is a plan hash as captf prints it.
	fullHash = regexp.MustCompile(`p2:[0-9a-f]{64}`)
	// comment is a shell comment after a command.
	comment = regexp.MustCompile(`\s+#.*$`)
)

// normalize makes a line of the page and a line captf printed
// comparable: every plan hash becomes p2:HASH.
func normalize(s string) string {
	s = fullHash.ReplaceAllString(s, "p2:HASH")
	return strings.TrimRight(shownHash.ReplaceAllString(s, "p2:HASH"), " ")
}

// TestCLIQuickstart runs every command of docs/quickstart.md's console
// blocks as written, in a copy of the repository's examples, with the real
// terraform: the page's shortened plan hashes stand for the hash the last
// `captf plan` printed (the plan key, and so every hash, is random per
// root). Each line the page shows under a command must be in what the
// command printed, and `echo $?` must print the exit code the page shows.
func TestCLIQuickstart(t *testing.T) {
	b, err := os.ReadFile(cliDoc)
	if err != nil {
		t.Fatal(err)
	}
	steps := consoleSteps(string(b))
	if len(steps) < 6 {
		t.Fatalf("only %d commands in the console blocks of %s: the reader is broken", len(steps), cliDoc)
	}
	tf := tftest.Terraform(t)
	work := t.TempDir()
	for _, ex := range []string{"quickstart", "kubernetes/module"} {
		if err := os.CopyFS(filepath.Join(work, "examples", ex), os.DirFS(filepath.Join("../../examples", ex))); err != nil {
			t.Fatal(err)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), tftest.Env(t)...)
	env = append(env, "PATH="+filepath.Dir(tf.Path)+string(os.PathListSeparator)+os.Getenv("PATH"))

	lastHash, lastExit := "", 0
	for _, s := range steps {
		command := strings.TrimSpace(comment.ReplaceAllString(s.command, ""))
		var out []byte
		switch {
		case command == "go build -o captf ./cmd/captf":
			// The page runs it in the repository; the binary goes where the
			// rest of the page runs it from.
			cmd := exec.Command("go", "build", "-o", filepath.Join(work, "captf"), "./cmd/captf")
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s:%d: %s: %v\n%s", cliDoc, s.line, command, err, out)
			}
			continue
		case command == "echo $?":
			out = []byte(strconv.Itoa(lastExit) + "\n")
		default:
			if shownHash.MatchString(command) {
				if lastHash == "" {
					t.Fatalf("%s:%d: %q names a plan hash before any plan printed one", cliDoc, s.line, command)
				}
				command = shownHash.ReplaceAllString(command, lastHash)
			}
			cmd := exec.Command("bash", "-c", command)
			cmd.Dir, cmd.Env = work, env
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			err := cmd.Run()
			lastExit = 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				lastExit = exit.ExitCode()
			} else if err != nil {
				t.Fatalf("%s:%d: %s: %v", cliDoc, s.line, command, err)
			}
			out = buf.Bytes()
			if strings.HasPrefix(command, "./captf plan") {
				if h := fullHash.FindString(string(out)); h != "" {
					lastHash = h
				}
			}
		}
		got := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			got[normalize(l)] = true
		}
		for _, want := range s.output {
			if strings.Contains(want, "…") && !shownHash.MatchString(want) {
				continue // "… terraform's own plan …": what terraform prints
			}
			if strings.TrimSpace(want) == "" {
				continue
			}
			if !got[normalize(want)] {
				t.Errorf("%s:%d: %s (exit %d) did not print the line the page shows:\n%s\nit printed:\n%s", cliDoc, s.line, command, lastExit, want, out)
			}
		}
	}
}
