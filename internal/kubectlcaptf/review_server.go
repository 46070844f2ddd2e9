package kubectlcaptf

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/planlog"
)

//go:embed review
var reviewFiles embed.FS

// contentSecurityPolicy allows the page's own stylesheet and script and
// its own event stream, nothing inline and nothing from elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// reviewServer serves the review pages. Every read and every approval is
// made with the caller's client, so with the caller's identity and RBAC.
type reviewServer struct {
	c client.WithWatch
	// cs reads the runner Jobs' logs; nil: the pages show none.
	cs kubernetes.Interface
	// namespace is the one namespace listed, or "" for every namespace.
	namespace string
	// user is the caller's username, as the API server reported it.
	user string
	// token is in every URL; csrf is in every form that changes something.
	token, csrf string
	// hosts are the Host headers the server answers to; origin is the one
	// Origin a browser's request may carry.
	hosts  map[string]bool
	origin string
	now    func() time.Time
	pages  *template.Template
	// refresh is how often a live page is rendered again without a change
	// (its ages move on).
	refresh time.Duration
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// newReviewServer returns the server for a listener on hostPort, a
// loopback address.
func newReviewServer(c client.WithWatch, namespace, user, hostPort string, now func() time.Time) (*reviewServer, error) {
	s := &reviewServer{c: c, namespace: namespace, user: user, now: now, refresh: 30 * time.Second,
		hosts: map[string]bool{hostPort: true}, origin: "http://" + hostPort}
	var err error
	if s.token, err = randomToken(); err != nil {
		return nil, err
	}
	if s.csrf, err = randomToken(); err != nil {
		return nil, err
	}
	s.pages, err = template.New("").Funcs(template.FuncMap{
		"link": s.link,
		"sub":  func(a, b int32) int32 { return a - b },
	}).ParseFS(reviewFiles, "review/*.html")
	if err != nil {
		return nil, fmt.Errorf("review pages: %w", err)
	}
	return s, nil
}

// URL is the address of the list page, with the token.
func (s *reviewServer) URL() string { return s.origin + s.link("/") }

// link is path with the token.
func (s *reviewServer) link(path string) string { return path + "?token=" + s.token }

// Handler is every page behind the checks of guard.
func (s *reviewServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.listPage)
	mux.HandleFunc("GET /events", s.listEvents)
	mux.HandleFunc("GET /plans/{namespace}/{name}", s.planPage)
	mux.HandleFunc("GET /plans/{namespace}/{name}/events", s.planEvents)
	mux.HandleFunc("GET /plans/{namespace}/{name}/approve", func(w http.ResponseWriter, r *http.Request) { s.confirmPage(w, r, s.planApproval(r)) })
	mux.HandleFunc("POST /plans/{namespace}/{name}/approve", func(w http.ResponseWriter, r *http.Request) { s.approve(w, r, s.planApproval(r)) })
	mux.HandleFunc("GET /machines/{namespace}/{name}", s.machinePage)
	mux.HandleFunc("GET /machines/{namespace}/{name}/events", s.machineEvents)
	mux.HandleFunc("GET /machines/{namespace}/{name}/approve", func(w http.ResponseWriter, r *http.Request) { s.confirmPage(w, r, s.machineApproval(r)) })
	mux.HandleFunc("POST /machines/{namespace}/{name}/approve", func(w http.ResponseWriter, r *http.Request) { s.approve(w, r, s.machineApproval(r)) })
	static, err := fs.Sub(reviewFiles, "review/static")
	if err != nil {
		panic(err) // the embedded folder is part of the binary
	}
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	return s.guard(mux)
}

// guard refuses what a page of this server never sends: a request for
// another Host (a DNS rebinding), from another Origin or another site,
// without the token, or a change without the CSRF token. Every answer
// carries the security headers.
func (s *reviewServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// The token is in every URL: no other site may see it in a Referer.
		// same-origin, not no-referrer, under which a browser sends
		// "Origin: null" with the page's own form.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		origin := r.Header.Get("Origin")
		switch site := r.Header.Get("Sec-Fetch-Site"); {
		case !s.hosts[r.Host]:
			http.Error(w, "refused: this server answers only to "+s.origin+", not to Host "+r.Host, http.StatusForbidden)
		case origin != "" && origin != s.origin:
			http.Error(w, "refused: a request from another origin ("+origin+")", http.StatusForbidden)
		case site != "" && site != "same-origin" && site != "none":
			http.Error(w, "refused: a request from another site (Sec-Fetch-Site: "+site+")", http.StatusForbidden)
		case !equal(r.URL.Query().Get("token"), s.token):
			http.Error(w, "refused: the URL lacks the token kubectl captf review printed", http.StatusForbidden)
		case r.Method != http.MethodGet && r.Method != http.MethodHead && (origin != s.origin || !equal(r.PostFormValue("csrf"), s.csrf)):
			http.Error(w, "refused: a change needs the form of this page (Origin and CSRF token)", http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// page is what every page's frame shows.
type page struct {
	Title     string
	User      string
	Namespace string
	CSRF      string
	// Events is the path of the page's event stream ("" for none).
	Events string
	Error  string
	Data   any
}

func (s *reviewServer) frame(title, events string, data any) page {
	ns := s.namespace
	if ns == "" {
		ns = "every namespace"
	}
	return page{Title: title, User: s.user, Namespace: ns, CSRF: s.csrf, Events: events, Data: data}
}

// render writes the template name with p.
func (s *reviewServer) render(w http.ResponseWriter, status int, name string, p page) {
	var b bytes.Buffer
	if err := s.pages.ExecuteTemplate(&b, name, p); err != nil {
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail shows err on a page: the API server's own message, with its code.
func (s *reviewServer) fail(w http.ResponseWriter, title string, err error) {
	p := s.frame(title, "", nil)
	p.Error = err.Error()
	s.render(w, statusOf(err), "error.html", p)
}

// statusOf is the HTTP status the API server answered with err.
func statusOf(err error) int {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 400 {
		return int(status.Status().Code)
	}
	return http.StatusBadGateway
}

// waitingList is the list page's live part.
type waitingList struct {
	Rows []waitingRow
	// Machines says why TerraformMachines are not listed, if they are not.
	Machines string
}

// waiting lists what waits for an approval: the Pending TerraformPlans
// and the TerraformMachines with a plan in status.
func (s *reviewServer) waiting(ctx context.Context) (waitingList, error) {
	var l waitingList
	opts := []client.ListOption{client.MatchingLabels{infrav1.LabelPlanPhase: string(infrav1.PlanPending)}}
	if s.namespace != "" {
		opts = append(opts, client.InNamespace(s.namespace))
	}
	var plans infrav1.TerraformPlanList
	if err := s.c.List(ctx, &plans, opts...); err != nil {
		return l, fmt.Errorf("list TerraformPlans: %w", err)
	}
	now := s.now()
	for i := range plans.Items {
		l.Rows = append(l.Rows, planRow(&plans.Items[i], now))
	}
	var machines infrav1.TerraformMachineList
	switch err := s.c.List(ctx, &machines, opts[1:]...); {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || meta404(err):
		l.Machines = "TerraformMachines are not listed: " + err.Error()
	case err != nil:
		return l, fmt.Errorf("list TerraformMachines: %w", err)
	}
	for i := range machines.Items {
		if machines.Items[i].Status.Plan != nil {
			l.Rows = append(l.Rows, machineRow(&machines.Items[i], now))
		}
	}
	sortRows(l.Rows)
	return l, nil
}

// meta404 reports whether err says the API server does not serve a kind.
func meta404(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no matches for kind")
}

func (s *reviewServer) listPage(w http.ResponseWriter, r *http.Request) {
	l, err := s.waiting(r.Context())
	if err != nil {
		s.fail(w, "Plans waiting for approval", err)
		return
	}
	s.render(w, http.StatusOK, "list.html", s.frame("Plans waiting for approval", s.link("/events"), l))
}

// listEvents streams the list's live part each time a plan or a machine
// changes.
func (s *reviewServer) listEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var inNamespace []client.ListOption
	if s.namespace != "" {
		inNamespace = append(inNamespace, client.InNamespace(s.namespace))
	}
	changed := s.watch(ctx, &infrav1.TerraformPlanList{}, inNamespace...)
	machines := s.watch(ctx, &infrav1.TerraformMachineList{}, inNamespace...)
	s.stream(w, r, func(ctx context.Context) (any, error) {
		l, err := s.waiting(ctx)
		return map[string]any{"html": s.fragment("waiting", l), "count": len(l.Rows)}, err
	}, changed, machines)
}

// stream sends event "update" with what next returns, once now and again
// after each value of changed (and every s.refresh), until the client or
// the server goes.
func (s *reviewServer) stream(w http.ResponseWriter, r *http.Request, next func(context.Context) (any, error), changed ...<-chan struct{}) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no streaming", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	ticker := time.NewTicker(s.refresh)
	defer ticker.Stop()
	changes := merge(ctx, changed...)
	last := ""
	for {
		data, err := next(ctx)
		if err != nil {
			data = map[string]any{"error": err.Error()}
		}
		b, err := json.Marshal(data)
		if err != nil {
			return
		}
		if string(b) != last {
			last = string(b)
			if _, err := fmt.Fprintf(w, "event: update\ndata: %s\n\n", b); err != nil {
				return
			}
			flusher.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
			// Let a burst of changes (an approval, the phase, a label) settle.
			time.Sleep(100 * time.Millisecond)
		case <-ticker.C:
		}
	}
}

// merge sends on one channel whenever any of chans does.
func merge(ctx context.Context, chans ...<-chan struct{}) <-chan struct{} {
	out := make(chan struct{}, 1)
	for _, c := range chans {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-c:
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	return out
}

// watch watches list with opts as the caller, and sends on the channel it
// returns for each event, and after each restart of the watch (a change
// may have been missed). A watch the caller may not make sends nothing.
func (s *reviewServer) watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) <-chan struct{} {
	ch := make(chan struct{}, 1)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	go func() {
		for first := true; ctx.Err() == nil; first = false {
			wi, err := s.c.Watch(ctx, list, opts...)
			if err != nil {
				if apierrors.IsForbidden(err) || meta404(err) {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(2 * time.Second):
				}
				continue
			}
			if !first {
				signal()
			}
			for range wi.ResultChan() {
				signal()
			}
			wi.Stop()
		}
	}()
	return ch
}

// fragment renders the template name with data, for an event.
func (s *reviewServer) fragment(name string, data any) string {
	var b bytes.Buffer
	if err := s.pages.ExecuteTemplate(&b, name, page{User: s.user, CSRF: s.csrf, Data: data}); err != nil {
		return template.HTMLEscapeString("render " + name + ": " + err.Error())
	}
	return b.String()
}

// planAndRecent reads the plan and the plans of its namespace.
func (s *reviewServer) planAndRecent(ctx context.Context, ns, name string) (planPage, error) {
	p, err := getPlan(ctx, s.c, ns, name)
	if err != nil {
		return planPage{}, err
	}
	var recent infrav1.TerraformPlanList
	if err := s.c.List(ctx, &recent, client.InNamespace(ns)); err != nil {
		return planPage{}, fmt.Errorf("list TerraformPlans of %s: %w", ns, err)
	}
	pg := newPlanPage(p, recent.Items, s.now())
	if p.Spec.Approved {
		s.readLog(ctx, s.planLogOf(p), &pg.ApplyLog, logRequest{apply: true})
	}
	return pg, nil
}

// logOf writes a log of a runner Job to out, as req asks.
type logOf func(ctx context.Context, req logRequest, out io.Writer) error

// planLogOf reads the logs of p's Jobs: the plan Job's, or with
// req.apply the apply Job's.
func (s *reviewServer) planLogOf(p *infrav1.TerraformPlan) logOf {
	return func(ctx context.Context, req logRequest, out io.Writer) error {
		return jobLog(ctx, s.c, s.cs, p, req, out)
	}
}

// jobLogOf reads the log of the Job ns/job, the role Job of owner.
func (s *reviewServer) jobLogOf(ns, job, role, owner string) logOf {
	return func(ctx context.Context, req logRequest, out io.Writer) error {
		pod, err := jobPod(ctx, s.c, ns, job, role, owner)
		if err != nil {
			return err
		}
		return podLog(ctx, s.cs, pod, owner, req, out)
	}
}

// readPlanLog reads the plan Job's log into v and, from its closing
// section (read again from its tail, if v holds only its start), which
// attributes each resource change of t changes.
func (s *reviewServer) readPlanLog(ctx context.Context, read logOf, v *jobLogView, t *resourceTable) {
	s.readLog(ctx, read, v, logRequest{})
	if v.Error != "" {
		return
	}
	text := v.Text
	if v.Cut {
		var b bytes.Buffer
		if err := read(ctx, logRequest{tailLines: attributeLines, limitBytes: logLimit}, &b); err != nil {
			return
		}
		text = b.String()
	}
	changed, err := planlog.Read(strings.NewReader(text))
	if err == nil {
		t.setAttributes(changed)
	}
}

// attributeLines is how many lines of a log's tail are read for its
// closing section, when the page holds only the log's start.
const attributeLines = 5000

// readLog reads into v up to logLimit bytes of the log read writes, or
// why it cannot.
func (s *reviewServer) readLog(ctx context.Context, read logOf, v *jobLogView, req logRequest) {
	if s.cs == nil {
		v.Error = "The log is not read here."
		return
	}
	var b bytes.Buffer
	req.limitBytes = logLimit + 1
	if err := read(ctx, req, &b); err != nil {
		v.Error = err.Error()
		return
	}
	v.Cut = b.Len() > logLimit
	v.Text = string(b.Bytes()[:min(b.Len(), logLimit)])
}

func (s *reviewServer) planPage(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	pg, err := s.planAndRecent(r.Context(), ns, name)
	if err != nil {
		s.fail(w, "TerraformPlan "+ns+"/"+name, err)
		return
	}
	s.readPlanLog(r.Context(), s.planLogOf(pg.plan), &pg.PlanLog, &pg.resourceTable)
	s.render(w, http.StatusOK, "plan.html", s.frame("TerraformPlan "+ns+"/"+name, s.link(planPath(ns, name)+"/events"), pg))
}

// planEvents streams the plan's live part: its phase, its approval and
// the target's recent plans.
func (s *reviewServer) planEvents(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	changed := s.watch(r.Context(), &infrav1.TerraformPlanList{}, client.InNamespace(ns))
	s.stream(w, r, func(ctx context.Context) (any, error) {
		pg, err := s.planAndRecent(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		return map[string]any{"html": s.fragment("live", pg), "phase": pg.Phase}, nil
	}, changed)
}

// approval is what the confirmation and the approval of one kind of plan
// need: the title, the page the confirmation shows, how to approve as the
// caller, and the page to go back to.
type approval struct {
	title   string
	read    func(context.Context) (any, error)
	approve func(ctx context.Context, hash string) error
	back    string
}

// planApproval approves the TerraformPlan of the request as kubectl
// captf approve --plan-hash does.
func (s *reviewServer) planApproval(r *http.Request) approval {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	return approval{
		title: "Approve TerraformPlan " + ns + "/" + name,
		read:  func(ctx context.Context) (any, error) { return s.planAndRecent(ctx, ns, name) },
		approve: func(ctx context.Context, hash string) error {
			_, _, err := approvePlan(ctx, s.c, ns, name, hash)
			return err
		},
		back: planPath(ns, name),
	}
}

// machineApproval approves the plan waiting in the status of the
// TerraformMachine of the request, by its annotation.
func (s *reviewServer) machineApproval(r *http.Request) approval {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	return approval{
		title: "Approve the plan of TerraformMachine " + ns + "/" + name,
		read:  func(ctx context.Context) (any, error) { return s.machineState(ctx, ns, name, nil) },
		approve: func(ctx context.Context, hash string) error {
			return approveMachine(ctx, s.c, ns, name, hash)
		},
		back: machinePath(ns, name),
	}
}

// confirmPage asks to confirm the approval a of the plan on screen.
func (s *reviewServer) confirmPage(w http.ResponseWriter, r *http.Request, a approval) {
	pg, err := a.read(r.Context())
	if err != nil {
		s.fail(w, a.title, err)
		return
	}
	s.render(w, http.StatusOK, "confirm.html", s.frame(a.title, "", pg))
}

// approve approves, as the caller, the plan whose hash the form names; a
// refusal is shown on the confirmation page, in the API server's words.
func (s *reviewServer) approve(w http.ResponseWriter, r *http.Request, a approval) {
	hash := r.PostFormValue("plan-hash")
	if hash == "" {
		http.Error(w, "the form names no plan hash", http.StatusBadRequest)
		return
	}
	err := a.approve(r.Context(), hash)
	if err == nil {
		http.Redirect(w, r, s.link(a.back), http.StatusSeeOther)
		return
	}
	pg, readErr := a.read(r.Context())
	if readErr != nil {
		s.fail(w, a.title, err)
		return
	}
	p := s.frame(a.title, "", pg)
	p.Error = err.Error()
	status := statusOf(err)
	if status == http.StatusBadGateway {
		status = http.StatusConflict // refused by the plugin: another hash, approver, or a plan that no longer waits
	}
	s.render(w, status, "confirm.html", p)
}

// machineState reads what the page of the TerraformMachine ns/name
// shows: the plan that waits in its status, with its plan Job's log, and
// the apply of an approved plan with its log: the manager's apply Job
// that carries it (captf.io/approved-plan).
// A live page passes the plan log it read last (known, nil for none): a
// plan in status names a plan Job that has ended, whose log no longer
// changes, so it is read once per plan, not at every update.
func (s *reviewServer) machineState(ctx context.Context, ns, name string, known *machinePlanLog) (machinePage, error) {
	var m infrav1.TerraformMachine
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
		return machinePage{}, fmt.Errorf("TerraformMachine %s/%s: %w", ns, name, err)
	}
	title := "TerraformMachine " + ns + "/" + name
	pg := newMachinePage(&m, s.now())
	if p := m.Status.Plan; p != nil {
		if known != nil && known.job == p.Job {
			pg.PlanLog, pg.resourceTable = known.log, known.table
		} else {
			s.readPlanLog(ctx, s.jobLogOf(ns, p.Job, "plan", title), &pg.PlanLog, &pg.resourceTable)
			if known != nil && pg.PlanLog.Error == "" {
				*known = machinePlanLog{job: p.Job, log: pg.PlanLog, table: pg.resourceTable}
			}
		}
	}
	if job, hash := s.machineApply(ctx, &m); job != "" {
		pg.Apply = applyStatus(&m, job, hash)
		pg.ApplyLog = jobLogView{Test: "apply-log", Command: kubectlLogs(ns, job)}
		s.readLog(ctx, s.jobLogOf(ns, job, "apply", title), &pg.ApplyLog, logRequest{})
	}
	return pg, nil
}

// machinePlanLog is a plan Job's log as a machine's page read it, with
// the resources table its closing section filled.
type machinePlanLog struct {
	job   string
	log   jobLogView
	table resourceTable
}

// machinePage shows a TerraformMachine's plan, its approval and its apply.
func (s *reviewServer) machinePage(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	title := "TerraformMachine " + ns + "/" + name
	pg, err := s.machineState(r.Context(), ns, name, nil)
	if err != nil {
		s.fail(w, title, err)
		return
	}
	s.render(w, http.StatusOK, "machine.html", s.frame(title, s.link(machinePath(ns, name)+"/events"), pg))
}

// machineEvents streams the machine's page each time the machine
// changes: its plan, its approval, its apply and the apply's log.
func (s *reviewServer) machineEvents(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	changed := s.watch(r.Context(), &infrav1.TerraformMachineList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	var known machinePlanLog
	s.stream(w, r, func(ctx context.Context) (any, error) {
		pg, err := s.machineState(ctx, ns, name, &known)
		if err != nil {
			return nil, err
		}
		return map[string]any{"html": s.fragment("machine-live", pg)}, nil
	}, changed)
}

// machineApply is the apply Job of m that carries an approved plan, and
// the plan's hash: of the plan that waits, or while none waits of any.
// It is "" when there is none, or the caller may not read the Job.
func (s *reviewServer) machineApply(ctx context.Context, m *infrav1.TerraformMachine) (job, hash string) {
	name := machineApplyJob(m)
	if name == "" {
		return "", ""
	}
	var j batchv1.Job
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, &j); err != nil {
		return "", ""
	}
	hash = j.Annotations[infrav1.AnnotationApprovedPlan]
	if hash == "" || (m.Status.Plan != nil && m.Status.Plan.PlanHash != hash) {
		return "", ""
	}
	return name, hash
}
