package ci

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// forge is a test server standing in for GitHub's and GitLab's REST APIs:
// the comments of a pull (merge) request, the requests a commit merged,
// and who a token belongs to — only what captf-preview.sh calls, in the
// shapes of GitHub's "issue comments" and "list pull requests associated
// with a commit" and GitLab's "notes", "merge requests of a commit" and
// "current user" endpoints.
type forge struct {
	*httptest.Server
	mu       sync.Mutex
	comments map[int][]comment // by request number
	merged   map[string]int    // commit → the request it merged
	users    map[string]string // token → login
	nextID   int
}

type comment struct {
	ID     int
	Body   string
	Author string
}

func newForge(t *testing.T) *forge {
	f := &forge{comments: map[int][]comment{}, merged: map[string]int{}, users: map[string]string{}, nextID: 1000}
	mux := http.NewServeMux()
	// GitHub
	mux.HandleFunc("GET /gh/repos/acme/infra/issues/{n}/comments", f.list(func(c comment) any {
		return map[string]any{"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.Author}}
	}))
	mux.HandleFunc("POST /gh/repos/acme/infra/issues/{n}/comments", f.create)
	mux.HandleFunc("PATCH /gh/repos/acme/infra/issues/comments/{id}", f.edit)
	mux.HandleFunc("GET /gh/repos/acme/infra/commits/{sha}/pulls", f.mergedBy(func(n int) any {
		return map[string]any{"number": n, "merged_at": "2026-12-01T00:00:00Z"}
	}))
	// GitLab
	mux.HandleFunc("GET /gl/api/v4/user", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"username": f.user(r)})
	})
	mux.HandleFunc("GET /gl/api/v4/projects/42/merge_requests/{n}/notes", f.list(func(c comment) any {
		return map[string]any{"id": c.ID, "body": c.Body, "author": map[string]any{"username": c.Author}}
	}))
	mux.HandleFunc("POST /gl/api/v4/projects/42/merge_requests/{n}/notes", f.create)
	mux.HandleFunc("PUT /gl/api/v4/projects/42/merge_requests/{n}/notes/{id}", f.edit)
	mux.HandleFunc("GET /gl/api/v4/projects/42/repository/commits/{sha}/merge_requests", f.mergedBy(func(n int) any {
		return map[string]any{"iid": n, "state": "merged"}
	}))
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.user(r) == "" {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if v == nil {
		v = []any{}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// user is who the request's token belongs to; "" for none.
func (f *forge) user(r *http.Request) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	token := r.Header.Get("PRIVATE-TOKEN")
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = t
	}
	return f.users[token]
}

// mergedBy answers the requests a commit merged: one, or none.
func (f *forge) mergedBy(shape func(n int) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		out := []any{}
		if n, ok := f.merged[r.PathValue("sha")]; ok {
			out = append(out, shape(n))
		}
		reply(w, out)
	}
}

// list answers a page of a request's comments, oldest first, per_page at
// most 100 as both forges do.
func (f *forge) list(shape func(comment) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		per = min(max(per, 1), 100)
		page = max(page, 1)
		f.mu.Lock()
		defer f.mu.Unlock()
		all := f.comments[n]
		out := []any{}
		for i := (page - 1) * per; i < len(all) && i < page*per; i++ {
			out = append(out, shape(all[i]))
		}
		reply(w, out)
	}
}

func (f *forge) create(w http.ResponseWriter, r *http.Request) {
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		http.Error(w, "a body is required", http.StatusUnprocessableEntity)
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	who := f.user(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.comments[n] = append(f.comments[n], comment{ID: f.nextID, Body: in.Body, Author: who})
	w.WriteHeader(http.StatusCreated)
	reply(w, map[string]any{"id": f.nextID})
}

// edit changes a comment's body; only its author may.
func (f *forge) edit(w http.ResponseWriter, r *http.Request) {
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		http.Error(w, "a body is required", http.StatusUnprocessableEntity)
		return
	}
	id, _ := strconv.Atoi(r.PathValue("id"))
	who := f.user(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, cs := range f.comments {
		for i := range cs {
			if cs[i].ID == id {
				if cs[i].Author != who {
					http.Error(w, "not yours", http.StatusForbidden)
					return
				}
				f.comments[n][i].Body = in.Body
				reply(w, map[string]any{"id": id})
				return
			}
		}
	}
	http.NotFound(w, r)
}

// post adds a comment as author, as another user of the forge would.
func (f *forge) post(n int, author, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.comments[n] = append(f.comments[n], comment{ID: f.nextID, Body: body, Author: author})
}

// by lists the comments of request n by author.
func (f *forge) by(n int, author string) []comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(f.comments[n]), func(c comment) bool { return c.Author != author })
}

func (f *forge) all() []comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []comment
	for _, cs := range f.comments {
		out = append(out, cs...)
	}
	return out
}
