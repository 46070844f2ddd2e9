package ci

import (
	"os"
	"strings"
	"testing"
)

const marker = "<!-- captf:preview -->"

// forged is a comment someone else posted on the request: the marker and
// a digest of their own. The apply must never take it.
const forged = marker + "\nDigest: `cs1:0000000000000000000000000000000000000000000000000000000000000000`\n"

// githubWorkflow is the part of a GitHub Actions workflow the test runs.
type githubWorkflow struct {
	Env  map[string]string
	Jobs map[string]struct {
		If    string
		Steps []struct {
			Name string
			Uses string
			If   string
			Run  string
			Env  map[string]string
			With map[string]string
		}
	}
}

// runGitHubJob runs the steps of one job of the workflow as a runner does:
// each run step in bash with the workflow's and the step's env, a step
// after a failure only when it says if: always(). It returns the exit code
// of the first step that failed, else 0.
func runGitHubJob(t *testing.T, r *repo, wf *githubWorkflow, job string, values map[string]string, env []string) int {
	t.Helper()
	j, ok := wf.Jobs[job]
	if !ok {
		t.Fatalf("the workflow has no job %q", job)
	}
	failed := 0
	for _, s := range j.Steps {
		if failed != 0 && s.If != "always()" {
			continue
		}
		switch {
		case strings.HasPrefix(s.Uses, "actions/checkout@"):
			// The fixture repository is the checkout.
		case strings.HasPrefix(s.Uses, "actions/setup-go@"), strings.HasPrefix(s.Uses, "hashicorp/setup-terraform@"), s.Name == "Install captf":
			// The test's PATH holds terraform, and the captf and
			// captf-preview of this tree (TestExamplesInstallBoth checks
			// that the step installs both).
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
			if name := expressions(t, s.With["name"], values); !strings.HasPrefix(name, "captf-changeset-") {
				t.Errorf("artifact name %q", name)
			}
			if _, err := os.Stat(r.dir + "/" + s.With["path"]); err != nil {
				t.Errorf("the artifact %s is not there: %v", s.With["path"], err)
			}
		case s.Run != "":
			stepEnv := append([]string(nil), env...)
			for k, v := range wf.Env {
				stepEnv = append(stepEnv, k+"="+expressions(t, v, values))
			}
			for k, v := range s.Env {
				stepEnv = append(stepEnv, k+"="+expressions(t, v, values))
			}
			if code := r.run(expressions(t, s.Run, values), stepEnv); code != 0 && failed == 0 {
				failed = code
			}
		default:
			t.Fatalf("step %q uses %q, which the test does not know", s.Name, s.Uses)
		}
	}
	return failed
}

// TestGitHubActions runs examples/ci/github-actions.yml: a pull request's
// plan job posts the note as one comment (updated, never duplicated, when
// it runs again) and keeps the document; the merge's apply job applies
// exactly the digest of the bot's note — never one another user posted —
// and applies nothing when the change moved after the review.
func TestGitHubActions(t *testing.T) {
	r := newRepo(t)
	f := newForge(t)
	const bot = "github-actions[bot]"
	f.users["gh-token"] = bot
	var wf githubWorkflow
	readYAML(t, "../../examples/ci/github-actions.yml", &wf)
	env := []string{"GITHUB_ACTIONS=true", "GITHUB_API_URL=" + f.URL + "/gh", "GITHUB_REPOSITORY=acme/infra"}
	// The secret's value is the key the repository's jobs share.
	values := func(pr, digest string) map[string]string {
		return map[string]string{
			"secrets.CAPTF_PREVIEW_KEY":        r.key(),
			"github.token":                     "gh-token",
			"github.event.pull_request.number": pr,
			"github.event.inputs.digest":       digest,
		}
	}

	// Pull request 7 paints the resource red; someone else has posted a
	// marker with a digest of their own, and enough comments that the
	// bot's lands on the second page.
	for range 120 {
		f.post(7, "reviewer", "looks fine")
	}
	f.post(7, "mallory", forged)
	r.paint("red")
	r.commit("paint it red")
	if code := runGitHubJob(t, r, &wf, "plan", (values("7", "")), env); code != 0 {
		t.Fatalf("plan job exited %d", code)
	}
	notes := f.by(7, bot)
	if len(notes) != 1 || !strings.HasPrefix(notes[0].Body, marker) {
		t.Fatalf("the bot's comments: %+v; want one note", notes)
	}
	digest := noteDigest(t, notes[0].Body)
	if doc := r.document(); doc != digest {
		t.Errorf("the note shows %s, the kept document %s", digest, doc)
	}
	if r.applied() != "" {
		t.Fatal("the plan job applied something")
	}
	// Run again (a re-run, or a push that changes nothing): the same
	// comment is updated.
	if code := runGitHubJob(t, r, &wf, "plan", (values("7", "")), env); code != 0 {
		t.Fatalf("second plan job exited %d", code)
	}
	if again := f.by(7, bot); len(again) != 1 || again[0].ID != notes[0].ID || noteDigest(t, again[0].Body) != digest {
		t.Errorf("after a second plan the bot's comments are %+v; want the one note, updated", again)
	}

	// The merge applies exactly the note's digest.
	merge := r.commit("merge pull request 7")
	f.merged[merge] = 7
	if code := runGitHubJob(t, r, &wf, "apply", (values("", "")), append(env, "GITHUB_SHA="+merge)); code != 0 {
		t.Fatalf("apply job exited %d", code)
	}
	if got := r.applied(); got != "red" {
		t.Fatalf("applied %q, want red", got)
	}

	// Pull request 8 paints it green and is reviewed; a commit after the
	// review (approval not dismissed) paints it yellow. The apply refuses
	// with exit 3 and applies nothing.
	r.paint("green")
	r.commit("paint it green")
	if code := runGitHubJob(t, r, &wf, "plan", (values("8", "")), env); code != 0 {
		t.Fatalf("plan job of pull request 8 exited %d", code)
	}
	r.paint("yellow")
	merge = r.commit("merge pull request 8, with a commit after the review")
	f.merged[merge] = 8
	if code := runGitHubJob(t, r, &wf, "apply", (values("", "")), append(env, "GITHUB_SHA="+merge)); code != 3 {
		t.Fatalf("apply job of a moved change set exited %d, want 3", code)
	}
	if got := r.applied(); got != "red" {
		t.Errorf("a moved change set applied %q; want red left as it was", got)
	}

	// A commit that merged no pull request has nothing approved.
	lone := r.commit("a push without a pull request")
	if code := runGitHubJob(t, r, &wf, "apply", (values("", "")), append(env, "GITHUB_SHA="+lone)); code != 2 {
		t.Errorf("apply job of a commit without a pull request exited %d, want 2", code)
	}
	r.canary(f)
}

// TestExamplesInstallBoth: each example's install command installs captf
// and, beside it, captf-preview, which captf preview runs, at one version.
func TestExamplesInstallBoth(t *testing.T) {
	var wf githubWorkflow
	readYAML(t, "../../examples/ci/github-actions.yml", &wf)
	var commands []string
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if s.Name == "Install captf" {
				commands = append(commands, s.Run)
			}
		}
	}
	var file map[string]any
	readYAML(t, "../../examples/ci/gitlab-ci.yml", &file)
	for _, l := range file[".captf"].(map[string]any)["before_script"].([]any) {
		if strings.Contains(l.(string), "go install") {
			commands = append(commands, l.(string))
		}
	}
	if len(commands) != 3 {
		t.Fatalf("found %d install commands in the examples, want 3 (two GitHub jobs, GitLab's .captf): %q", len(commands), commands)
	}
	for _, cmd := range commands {
		for _, c := range []string{"captf", "captf-preview"} {
			if !strings.Contains(cmd, "go install") || !strings.Contains(cmd, "github.com/captf/captf/cmd/"+c+"@$CAPTF_VERSION") {
				t.Errorf("the example's install command %q does not install %s at $CAPTF_VERSION", cmd, c)
			}
		}
	}
}

// runGitLabJob runs a job's script lines in one bash, as the GitLab runner
// does (its before_script installs tools the test's PATH already holds),
// with the file's variables.
func runGitLabJob(t *testing.T, r *repo, file map[string]any, job string, env []string) int {
	t.Helper()
	raw, ok := file[job].(map[string]any)
	if !ok {
		t.Fatalf("the pipeline has no job %q", job)
	}
	var script []string
	for _, l := range raw["script"].([]any) {
		script = append(script, l.(string))
	}
	if vars, ok := file["variables"].(map[string]any); ok {
		for k, v := range vars {
			env = append(env, k+"="+v.(string))
		}
	}
	return r.run(strings.Join(script, "\n"), env)
}

// TestGitLabCI runs examples/ci/gitlab-ci.yml: the merge request's plan
// job posts the note as one note (updated when it runs again), and the
// merge's apply job applies exactly the digest of the token user's note.
func TestGitLabCI(t *testing.T) {
	r := newRepo(t)
	f := newForge(t)
	f.users["gl-token"] = "captf-bot"
	var file map[string]any
	readYAML(t, "../../examples/ci/gitlab-ci.yml", &file)
	env := []string{"GITLAB_CI=true", "CI_API_V4_URL=" + f.URL + "/gl/api/v4", "CI_PROJECT_ID=42", "GITLAB_TOKEN=gl-token"}

	f.post(3, "mallory", forged)
	r.paint("red")
	r.commit("paint it red")
	for range 2 {
		if code := runGitLabJob(t, r, file, "captf-plan", append(env, "CI_MERGE_REQUEST_IID=3")); code != 0 {
			t.Fatalf("plan job exited %d", code)
		}
	}
	notes := f.by(3, "captf-bot")
	if len(notes) != 1 || !strings.HasPrefix(notes[0].Body, marker) {
		t.Fatalf("the bot's notes: %+v; want one note", notes)
	}
	if noteDigest(t, notes[0].Body) != r.document() {
		t.Error("the note and the kept document name different digests")
	}
	merge := r.commit("merge request 3")
	f.merged[merge] = 3
	if code := runGitLabJob(t, r, file, "captf-apply", append(env, "CI_COMMIT_SHA="+merge)); code != 0 {
		t.Fatalf("apply job exited %d", code)
	}
	if got := r.applied(); got != "red" {
		t.Fatalf("applied %q, want red", got)
	}
	r.canary(f)
}
