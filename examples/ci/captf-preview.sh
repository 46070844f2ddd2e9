#!/usr/bin/env bash
# captf-preview.sh runs captf's pull-request preview in CI; the GitHub
# Actions and GitLab CI examples beside it call it.
#
#   captf-preview.sh plan    on a pull (merge) request: plan the change set,
#                            post the note as one comment or update the one
#                            posted before (found by its marker), and keep
#                            the document in .captf/preview/changeset.json
#   captf-preview.sh apply   on the merge: read the digest the reviewed note
#                            shows and apply exactly that change set
#
# Environment:
#   CAPTF_PREVIEW_KEY    the preview key, base64, from the CI's secret store;
#                        the plan and the apply must get the same one
#   CAPTF_ENV            the project file's environment (--env), optional
#   CAPTF_EXPECT_DIGEST  apply: the digest to apply instead of the note's
#                        (a held member's next round), optional
#   CAPTF                the captf binary, default: captf on PATH
#   GitHub Actions:      GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_TOKEN,
#                        PR_NUMBER (plan), GITHUB_SHA (apply),
#                        CAPTF_BOT (the login whose comment counts,
#                        default github-actions[bot])
#   GitLab CI:           CI_API_V4_URL, CI_PROJECT_ID, GITLAB_TOKEN (a token
#                        with the api scope), CI_MERGE_REQUEST_IID (plan),
#                        CI_COMMIT_SHA (apply)
#
# Exit codes are captf's: 0 planned or applied, 1 a member failed, 2 bad
# input, 3 the change set moved since the review (nothing applied), 4 a
# held member's next round needs its own approval (the note says which).
set -euo pipefail

captf="${CAPTF:-captf}"
out=.captf/preview
marker='<!-- captf:preview -->'

if [[ -n "${GITHUB_ACTIONS:-}" ]]; then forge=github
elif [[ -n "${GITLAB_CI:-}" ]]; then forge=gitlab
else echo "captf-preview.sh: neither GITHUB_ACTIONS nor GITLAB_CI is set" >&2; exit 2
fi

# The key goes to captf's default place, readable by this user only and
# removed on exit; never to argv. So the note's apply command names no
# file that is gone when a person reads it.
[[ -n "${CAPTF_PREVIEW_KEY:-}" ]] || { echo "captf-preview.sh: CAPTF_PREVIEW_KEY is empty" >&2; exit 2; }
keydir="$(mktemp -d)"
key=.captf/preview-key
trap 'rm -rf "$keydir" "$key"' EXIT
mkdir -p .captf
(umask 077 && printf '%s' "$CAPTF_PREVIEW_KEY" | base64 -d >"$key")
env_flag=()
[[ -z "${CAPTF_ENV:-}" ]] || env_flag=(--env "$CAPTF_ENV")

# api METHOD PATH [BODY-FILE]: one request to the forge's REST API.
api() {
  local method="$1" path="$2" body="${3:-}" args=()
  if [[ "$forge" == github ]]; then
    args=(-H "Authorization: Bearer $GITHUB_TOKEN" -H "Accept: application/vnd.github+json" "$GITHUB_API_URL/repos/$GITHUB_REPOSITORY/$path")
  else
    args=(-H "PRIVATE-TOKEN: $GITLAB_TOKEN" "$CI_API_V4_URL/projects/$CI_PROJECT_ID/$path")
  fi
  [[ -z "$body" ]] || args=(-H "Content-Type: application/json" --data-binary "@$body" "${args[@]}")
  curl -fsS -X "$method" "${args[@]}"
}

# bot is who posts the note; only a comment of the bot's counts, so that
# nobody else can post a marker and a digest of their own.
bot() {
  if [[ "$forge" == github ]]; then echo "${CAPTF_BOT:-github-actions[bot]}"
  else curl -fsS -H "PRIVATE-TOKEN: $GITLAB_TOKEN" "$CI_API_V4_URL/user" | jq -r .username
  fi
}

# comments_path REQUEST: where the pull (merge) request's comments are.
comments_path() {
  if [[ "$forge" == github ]]; then echo "issues/$1/comments"; else echo "merge_requests/$1/notes"; fi
}

# note_comment REQUEST: the id and body of the bot's comment that starts
# with the marker, as JSON; empty when there is none.
note_comment() {
  local who page=1 got
  who="$(bot)"
  while :; do
    got="$(api GET "$(comments_path "$1")?per_page=100&page=$page")"
    [[ "$(jq length <<<"$got")" -gt 0 ]] || return 0
    jq -ce --arg who "$who" --arg m "$marker" \
      'map(select((.user.login // .author.username) == $who and (.body | startswith($m)))) | first // empty' <<<"$got" && return 0
    page=$((page + 1))
  done
}

# post_note REQUEST: post the note, or update the bot's earlier one.
post_note() {
  local body="$keydir/body.json" id
  jq -Rs '{body: .}' <"$out/note.md" >"$body"
  id="$(note_comment "$1" | jq -r '.id // empty')"
  if [[ -z "$id" ]]; then
    api POST "$(comments_path "$1")" "$body" >/dev/null
  elif [[ "$forge" == github ]]; then
    api PATCH "issues/comments/$id" "$body" >/dev/null
  else
    api PUT "merge_requests/$1/notes/$id" "$body" >/dev/null
  fi
}

# merged_request: the pull (merge) request the commit being built merged.
merged_request() {
  if [[ "$forge" == github ]]; then
    api GET "commits/$GITHUB_SHA/pulls" | jq -r '(. // []) | map(select(.merged_at != null)) | first | .number // empty'
  else
    api GET "repository/commits/$CI_COMMIT_SHA/merge_requests" | jq -r '(. // []) | map(select(.state == "merged")) | first | .iid // empty'
  fi
}

case "${1:-}" in
plan)
  request="${PR_NUMBER:-${CI_MERGE_REQUEST_IID:-}}"
  [[ -n "$request" ]] || { echo "captf-preview.sh plan: no pull request (PR_NUMBER or CI_MERGE_REQUEST_IID)" >&2; exit 2; }
  status=0
  "$captf" preview plan "${env_flag[@]}" --out "$out" || status=$?
  # Bad input writes no note; a failed member's note says what failed.
  [[ -f "$out/note.md" ]] || exit "$status"
  post_note "$request"
  exit "$status"
  ;;
apply)
  digest="${CAPTF_EXPECT_DIGEST:-}"
  if [[ -z "$digest" ]]; then
    request="$(merged_request)"
    [[ -n "$request" ]] || { echo "captf-preview.sh apply: no merged pull request for this commit; nothing applied" >&2; exit 2; }
    digest="$(note_comment "$request" | jq -r .body | grep -o 'Digest: `cs1:[0-9a-f]\{64\}`' | head -1 | tr -d '`' | cut -d' ' -f2 || true)"
    [[ -n "$digest" ]] || { echo "captf-preview.sh apply: no captf note with a digest on request $request; nothing applied" >&2; exit 2; }
  fi
  status=0
  "$captf" preview apply "${env_flag[@]}" --out "$out" --expect-digest "$digest" || status=$?
  if [[ "$status" == 4 && -n "${request:-}" ]]; then
    # The next round's note, with its digest, for its own approval.
    post_note "$request"
  fi
  exit "$status"
  ;;
*)
  echo "usage: captf-preview.sh plan|apply" >&2
  exit 2
  ;;
esac
