// Package armtest is a test server in the shapes of the Azure Resource
// Manager REST API, for the arm-deploy capability's tests and the command
// line's end-to-end test. No ARM emulator runs on the machines captf is
// built on, so this is not Azure: it answers what captf calls, in the
// shapes Azure's REST API reference gives for them, and nothing else.
//
//   - Resource groups: GET and PUT /subscriptions/{sub}/resourcegroups/{rg}
//     (201 on create, 409 InvalidResourceGroupLocation for another
//     location), and the list of a group's resources, GET
//     …/resourceGroups/{rg}/resources, top-level resources only, paged
//     with nextLink when PageSize is set.
//   - Resources: GET, PUT and DELETE
//     …/resourceGroups/{rg}/providers/{namespace}/{type}/{name}[/{type}/{name}…],
//     and POST …/listKeys. A PUT body is stored with what the server adds:
//     id, name, type, etag, systemData, properties.provisioningState, the
//     location normalised ("West Europe" → "westeurope"), and per type the
//     properties ARM defaults or computes (a storage account's sku.tier,
//     primaryEndpoints, creationTime, accessTier; a SQL server's
//     fullyQualifiedDomainName). Write-only properties (a SQL server's
//     administratorLoginPassword, a Key Vault secret's value) are never
//     returned.
//   - Errors: {"error":{"code":…,"message":…}} with ARM's codes:
//     ResourceNotFound and ResourceGroupNotFound (404),
//     MissingApiVersionParameter, InvalidRequestContent, LocationRequired,
//     NoRegisteredProviderFound (400), AuthenticationFailed (401), and any
//     fault a test injects with Fail (a 500 InternalServerError, a 403
//     AuthorizationFailed).
//   - Long-running operations: Provision makes a type's PUT answer 201 with
//     a provisioningState that is not terminal and later GETs move through
//     the given states; DeleteAsync makes DELETE answer 202 and the
//     resource stay "Deleting" for some GETs.
//
// The server records every request it answers, so a test can say that
// nothing was PUT.
package armtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Subscription is a subscription id tests may use.
const Subscription = "00000000-0000-0000-0000-0000000c4a7f"

// Request is one request the server answered.
type Request struct {
	Method string
	// Path is the URL path, unescaped.
	Path  string
	Query url.Values
	Body  []byte
	// Authorization is the request's Authorization header.
	Authorization string
	// Status is the status the server answered.
	Status int
}

// Fault makes requests fail: those of Method (any when empty) whose path
// ends with PathSuffix (compared without case). Times bounds how many
// requests fail; 0 is every one.
type Fault struct {
	Method     string
	PathSuffix string
	Status     int
	Code       string
	Message    string
	Times      int
}

// Server is a running test server.
type Server struct {
	// URL is the server's base URL, the endpoint captf is given.
	URL string
	// PageSize, when above 0, cuts a list of a group's resources into
	// pages of that many, linked by nextLink.
	PageSize int
	// Token, when set, is the bearer token every request must carry;
	// others get 401 AuthenticationFailed.
	Token string

	mu        sync.Mutex
	groups    map[string]map[string]any // lower(group id) → group
	resources map[string]*stored        // lower(resource id) → resource
	order     []string                  // lower ids in the order first PUT
	requests  []Request
	faults    []*Fault
	provision map[string][]string // lower(type) → states after a PUT
	versions  map[string][]string // lower(type) → api-versions served
	seen      map[string][]string // resource type → api-versions PUT at
	delPolls  int
	serial    int
	now       time.Time
}

// stored is one resource: the object GET returns, and the states its
// provisioning or deletion still has to go through.
type stored struct {
	obj      map[string]any
	pending  []string // provisioningStates the next GETs return, in order
	deleting int      // GETs left before a 202 delete completes; -1 when not deleting
}

// New starts a server; it stops when the test ends.
func New(t testing.TB) *Server {
	s := &Server{
		groups:    map[string]map[string]any{},
		resources: map[string]*stored{},
		provision: map[string][]string{},
		versions:  map[string][]string{},
		seen:      map[string][]string{},
		now:       time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Fail injects a fault.
func (s *Server) Fail(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Provision makes each PUT of resourceType answer with the first of states
// as its provisioningState (201 when it is not terminal) and the GETs
// after it return the next ones, the last one staying.
func (s *Server) Provision(resourceType string, states ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.provision[strings.ToLower(resourceType)] = states
}

// APIVersions makes the server refuse requests for resourceType at any
// api-version but these, with 400 NoRegisteredProviderFound.
func (s *Server) APIVersions(resourceType string, versions ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions[strings.ToLower(resourceType)] = versions
}

// DeleteAsync makes DELETE answer 202 and the resource answer GET with
// provisioningState Deleting polls times before it is gone.
func (s *Server) DeleteAsync(polls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delPolls = polls
}

// Requests returns every request answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Writes returns the requests that could change something: PUT, PATCH,
// DELETE and POST other than listKeys.
func (s *Server) Writes() []Request {
	var out []Request
	for _, r := range s.Requests() {
		switch {
		case r.Method == http.MethodGet:
		case r.Method == http.MethodPost && strings.HasSuffix(strings.ToLower(r.Path), "/listkeys"):
		default:
			out = append(out, r)
		}
	}
	return out
}

// Resource returns a copy of the resource GET would return, nil when there
// is none.
func (s *Server) Resource(id string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resources[strings.ToLower(id)]
	if r == nil {
		return nil
	}
	return clone(r.obj)
}

// IDs returns the ids of the resources stored, in the order they were
// first put.
func (s *Server) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range s.order {
		if r := s.resources[k]; r != nil {
			out = append(out, r.obj["id"].(string))
		}
	}
	return out
}

// State describes every group and resource with its etag, which changes
// with every PUT: a test compares it before and after to see that nothing
// changed.
func (s *Server) State() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	var groups []string
	for k := range s.groups {
		groups = append(groups, k)
	}
	slices.Sort(groups)
	for _, g := range groups {
		fmt.Fprintf(&b, "%s %v\n", g, s.groups[g]["location"])
	}
	for _, k := range s.order {
		if r := s.resources[k]; r != nil {
			fmt.Fprintf(&b, "%s %v\n", r.obj["id"], r.obj["etag"])
		}
	}
	return b.String()
}

// Edit changes a stored resource as someone outside captf would (drift);
// it gets a new etag.
func (s *Server) Edit(id string, f func(obj map[string]any)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resources[strings.ToLower(id)]
	if r == nil {
		panic("armtest: no resource " + id)
	}
	f(r.obj)
	s.serial++
	r.obj["etag"] = s.etag()
}

// CreateGroup creates a resource group.
func (s *Server) CreateGroup(subscription, name, location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := "/subscriptions/" + subscription + "/resourceGroups/" + name
	s.groups[strings.ToLower(id)] = groupObject(id, name, normaliseLocation(location), nil)
}

// Seed stores a resource as if it had been PUT by someone else, with what
// the server adds. The id names its group, which must exist.
func (s *Server) Seed(id string, body map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := parsePath(id)
	if !ok || p.resourceType == "" {
		panic("armtest: not a resource id: " + id)
	}
	s.store(p, id, clone(body))
}

// ResourceID returns the id of a resource of a group.
func ResourceID(subscription, group, resourceType, name string) string {
	ns, rest, _ := strings.Cut(resourceType, "/")
	types := strings.Split(rest, "/")
	names := strings.Split(name, "/")
	id := "/subscriptions/" + subscription + "/resourceGroups/" + group + "/providers/" + ns
	for i, t := range types {
		id += "/" + t + "/" + names[i]
	}
	return id
}

// providerPath reads /subscriptions/{sub}/providers/{namespace}.
func providerPath(p string) (sub, ns string, ok bool) {
	seg := strings.Split(strings.Trim(p, "/"), "/")
	if len(seg) == 4 && strings.EqualFold(seg[0], "subscriptions") && strings.EqualFold(seg[2], "providers") {
		return seg[1], seg[3], true
	}
	return "", "", false
}

// providerAnswer is a resource provider with the types it serves: those
// APIVersions configured and those PUT, each at the api-versions seen.
func (s *Server) providerAnswer(sub, ns string) (int, any) {
	versions := map[string][]string{}
	for t, vs := range s.seen {
		versions[strings.ToLower(t)] = append(versions[strings.ToLower(t)], vs...)
	}
	for t, vs := range s.versions {
		versions[t] = append(versions[t], vs...)
	}
	var types []any
	var names []string
	for t := range versions {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		tns, rest, _ := strings.Cut(t, "/")
		if !strings.EqualFold(tns, ns) {
			continue
		}
		vs := slices.Clone(versions[t])
		slices.Sort(vs)
		vs = slices.Compact(vs)
		slices.Reverse(vs)
		list := make([]any, len(vs))
		for i, v := range vs {
			list[i] = v
		}
		types = append(types, map[string]any{"resourceType": rest, "apiVersions": list, "locations": []any{"West Europe", "East US"}})
	}
	if types == nil {
		return http.StatusNotFound, armError("InvalidResourceNamespace", fmt.Sprintf("The resource namespace '%s' is invalid.", ns))
	}
	return http.StatusOK, map[string]any{"id": "/subscriptions/" + sub + "/providers/" + ns, "namespace": ns, "registrationState": "Registered", "resourceTypes": types}
}

// path is a request path taken apart.
type path struct {
	subscription string
	group        string
	groupID      string
	// list is true for …/resourceGroups/{rg}/resources.
	list bool
	// resourceType is "Namespace/type[/child]" for a resource request,
	// empty for a group request.
	resourceType string
	// name is the last name segment, fullName every name joined by "/".
	name, fullName string
	// action is the last segment of a POST to a resource (listKeys).
	action string
}

func parsePath(p string) (path, bool) {
	seg := strings.Split(strings.Trim(p, "/"), "/")
	if len(seg) < 4 || !strings.EqualFold(seg[0], "subscriptions") || !strings.EqualFold(seg[2], "resourceGroups") {
		return path{}, false
	}
	out := path{subscription: seg[1], group: seg[3], groupID: "/subscriptions/" + seg[1] + "/resourceGroups/" + seg[3]}
	rest := seg[4:]
	switch {
	case len(rest) == 0:
		return out, true
	case len(rest) == 1 && strings.EqualFold(rest[0], "resources"):
		out.list = true
		return out, true
	case len(rest) < 4 || !strings.EqualFold(rest[0], "providers"):
		return path{}, false
	}
	ns := rest[1]
	pairs := rest[2:]
	if len(pairs)%2 == 1 {
		out.action = pairs[len(pairs)-1]
		pairs = pairs[:len(pairs)-1]
	}
	types := []string{ns}
	var names []string
	for i := 0; i < len(pairs); i += 2 {
		types = append(types, pairs[i])
		names = append(names, pairs[i+1])
	}
	if len(names) == 0 {
		return path{}, false
	}
	out.resourceType = strings.Join(types, "/")
	out.name = names[len(names)-1]
	out.fullName = strings.Join(names, "/")
	return out, true
}

// canonicalID is the id of a resource as the server returns it: the path
// of its first PUT, with ARM's casing of the fixed segments.
func canonicalID(p path) string {
	types := strings.Split(p.resourceType, "/")
	names := strings.Split(p.fullName, "/")
	id := p.groupID + "/providers/" + types[0]
	for i, t := range types[1:] {
		id += "/" + t + "/" + names[i]
	}
	return id
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := readAll(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	status, answer := s.answer(r, body)
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: body,
		Authorization: r.Header.Get("Authorization"), Status: status,
	})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("x-ms-request-id", fmt.Sprintf("00000000-0000-0000-0000-%012d", len(s.requests)))
	w.WriteHeader(status)
	if answer != nil {
		b, _ := json.Marshal(answer)
		_, _ = w.Write(b)
	}
}

func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}

// armError is ARM's error body.
func armError(code, message string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "message": message}}
}

func (s *Server) answer(r *http.Request, body []byte) (int, any) {
	if s.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.Token {
		return http.StatusUnauthorized, armError("AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing or invalid.")
	}
	if f := s.fault(r); f != nil {
		return f.Status, armError(f.Code, f.Message)
	}
	if sub, ns, ok := providerPath(r.URL.Path); ok && r.Method == http.MethodGet {
		return s.providerAnswer(sub, ns)
	}
	p, ok := parsePath(r.URL.Path)
	if !ok {
		return http.StatusNotFound, armError("InvalidResourceType", fmt.Sprintf("The resource type could not be found in the namespace for api version '%s'.", r.URL.Query().Get("api-version")))
	}
	version := r.URL.Query().Get("api-version")
	if version == "" {
		return http.StatusBadRequest, armError("MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
	}
	if served := s.versions[strings.ToLower(p.resourceType)]; p.resourceType != "" && len(served) > 0 && !slices.Contains(served, version) {
		return http.StatusBadRequest, armError("NoRegisteredProviderFound", fmt.Sprintf("No registered resource provider found for location 'westeurope' and API version '%s' for type '%s'. The supported api-versions are '%s'.", version, p.resourceType, strings.Join(served, ", ")))
	}
	group := s.groups[strings.ToLower(p.groupID)]
	switch {
	case p.list:
		if r.Method != http.MethodGet {
			return http.StatusMethodNotAllowed, armError("MethodNotAllowed", "The requested method is not allowed.")
		}
		if group == nil {
			return http.StatusNotFound, groupNotFound(p.group)
		}
		return s.list(r, p)
	case p.resourceType == "":
		return s.group(r, p, group, body)
	case p.action != "":
		if r.Method != http.MethodPost || !strings.EqualFold(p.action, "listKeys") {
			return http.StatusNotFound, armError("InvalidResourceType", "The resource type could not be found in the namespace '"+strings.Split(p.resourceType, "/")[0]+"'.")
		}
		return s.listKeys(p, group)
	}
	switch r.Method {
	case http.MethodGet:
		return s.get(p, group)
	case http.MethodPut:
		return s.put(p, group, body, version)
	case http.MethodDelete:
		return s.delete(p, group)
	}
	return http.StatusMethodNotAllowed, armError("MethodNotAllowed", "The requested method is not allowed.")
}

func (s *Server) fault(r *http.Request) *Fault {
	for _, f := range s.faults {
		if f.Method != "" && f.Method != r.Method {
			continue
		}
		if !strings.HasSuffix(strings.ToLower(r.URL.Path), strings.ToLower(f.PathSuffix)) {
			continue
		}
		if f.Times < 0 {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				f.Times = -1
			}
		}
		return f
	}
	return nil
}

func groupNotFound(name string) map[string]any {
	return armError("ResourceGroupNotFound", fmt.Sprintf("Resource group '%s' could not be found.", name))
}

func notFound(p path) map[string]any {
	return armError("ResourceNotFound", fmt.Sprintf("The Resource '%s/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix", p.resourceType, p.fullName, p.group))
}

func groupObject(id, name, location string, tags any) map[string]any {
	g := map[string]any{
		"id": id, "name": name, "type": "Microsoft.Resources/resourceGroups", "location": location,
		"properties": map[string]any{"provisioningState": "Succeeded"},
	}
	if tags != nil {
		g["tags"] = tags
	}
	return g
}

func (s *Server) group(r *http.Request, p path, group map[string]any, body []byte) (int, any) {
	switch r.Method {
	case http.MethodGet:
		if group == nil {
			return http.StatusNotFound, groupNotFound(p.group)
		}
		return http.StatusOK, group
	case http.MethodPut:
		var in map[string]any
		if err := json.Unmarshal(body, &in); err != nil {
			return http.StatusBadRequest, armError("InvalidRequestContent", "The request content was invalid and could not be deserialized: "+err.Error())
		}
		loc, _ := in["location"].(string)
		if loc == "" {
			return http.StatusBadRequest, armError("LocationRequired", "The location property is required for this definition.")
		}
		loc = normaliseLocation(loc)
		if group != nil {
			if group["location"] != loc {
				return http.StatusConflict, armError("InvalidResourceGroupLocation", fmt.Sprintf("Invalid resource group location '%s'. The Resource group already exists in location '%s'.", loc, group["location"]))
			}
			if t, ok := in["tags"]; ok {
				group["tags"] = t
			}
			return http.StatusOK, group
		}
		g := groupObject(p.groupID, p.group, loc, in["tags"])
		s.groups[strings.ToLower(p.groupID)] = g
		return http.StatusCreated, g
	}
	return http.StatusMethodNotAllowed, armError("MethodNotAllowed", "The requested method is not allowed.")
}

func (s *Server) get(p path, group map[string]any) (int, any) {
	if group == nil {
		return http.StatusNotFound, groupNotFound(p.group)
	}
	key := strings.ToLower(canonicalID(p))
	r := s.resources[key]
	if r == nil {
		return http.StatusNotFound, notFound(p)
	}
	if r.deleting >= 0 {
		if r.deleting == 0 {
			delete(s.resources, key)
			return http.StatusNotFound, notFound(p)
		}
		r.deleting--
		out := clone(r.obj)
		properties(out)["provisioningState"] = "Deleting"
		return http.StatusOK, out
	}
	if len(r.pending) > 0 {
		properties(r.obj)["provisioningState"] = r.pending[0]
		if len(r.pending) > 1 {
			r.pending = r.pending[1:]
		} else {
			r.pending = nil
		}
	}
	return http.StatusOK, clone(r.obj)
}

func (s *Server) put(p path, group map[string]any, body []byte, version string) (int, any) {
	if group == nil {
		return http.StatusNotFound, groupNotFound(p.group)
	}
	var in map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil || in == nil {
		return http.StatusBadRequest, armError("InvalidRequestContent", "The request content was invalid and could not be deserialized.")
	}
	topLevel := strings.Count(p.resourceType, "/") == 1
	if loc, _ := in["location"].(string); topLevel && loc == "" {
		return http.StatusBadRequest, armError("LocationRequired", "The location property is required for this definition.")
	}
	key := strings.ToLower(canonicalID(p))
	status := http.StatusOK
	if s.resources[key] == nil {
		status = http.StatusCreated
	}
	r := s.store(p, canonicalID(p), in)
	if v := version; !slices.Contains(s.seen[p.resourceType], v) {
		s.seen[p.resourceType] = append(s.seen[p.resourceType], v)
	}
	if states := s.provision[strings.ToLower(p.resourceType)]; len(states) > 0 {
		properties(r.obj)["provisioningState"] = states[0]
		r.pending = slices.Clone(states[1:])
		if !terminal(states[0]) {
			status = http.StatusCreated
		}
	}
	return status, clone(r.obj)
}

func terminal(state string) bool {
	return state == "Succeeded" || state == "Failed" || state == "Canceled"
}

func (s *Server) delete(p path, group map[string]any) (int, any) {
	if group == nil {
		return http.StatusNotFound, groupNotFound(p.group)
	}
	key := strings.ToLower(canonicalID(p))
	r := s.resources[key]
	if r == nil {
		return http.StatusNoContent, nil
	}
	if s.delPolls > 0 {
		r.deleting = s.delPolls
		return http.StatusAccepted, nil
	}
	delete(s.resources, key)
	return http.StatusOK, nil
}

func (s *Server) listKeys(p path, group map[string]any) (int, any) {
	if group == nil {
		return http.StatusNotFound, groupNotFound(p.group)
	}
	if s.resources[strings.ToLower(canonicalID(p))] == nil {
		return http.StatusNotFound, notFound(p)
	}
	return http.StatusOK, map[string]any{"keys": []any{
		map[string]any{"keyName": "key1", "value": "KEY1-" + p.name + "-c2VjcmV0a2V5MQ==", "permissions": "FULL"},
		map[string]any{"keyName": "key2", "value": "KEY2-" + p.name + "-c2VjcmV0a2V5Mg==", "permissions": "FULL"},
	}}
}

// list answers GET …/resourceGroups/{rg}/resources: the group's top-level
// resources (ARM does not list child resources there), each as a
// GenericResourceExpanded, paged by $skiptoken.
func (s *Server) list(r *http.Request, p path) (int, any) {
	prefix := strings.ToLower(p.groupID) + "/providers/"
	var items []any
	for _, k := range s.order {
		res := s.resources[k]
		if res == nil || !strings.HasPrefix(k, prefix) || strings.Count(strings.TrimPrefix(k, prefix), "/") != 2 {
			continue
		}
		item := map[string]any{}
		for _, f := range []string{"id", "name", "type", "location", "tags", "kind", "sku", "managedBy"} {
			if v, ok := res.obj[f]; ok {
				item[f] = v
			}
		}
		items = append(items, item)
	}
	start := 0
	if tok := r.URL.Query().Get("$skiptoken"); tok != "" {
		start, _ = strconv.Atoi(tok)
	}
	start = min(start, len(items))
	end := len(items)
	out := map[string]any{}
	if s.PageSize > 0 && start+s.PageSize < len(items) {
		end = start + s.PageSize
		q := r.URL.Query()
		q.Set("$skiptoken", strconv.Itoa(end))
		out["nextLink"] = s.URL + r.URL.Path + "?" + q.Encode()
	}
	page := items[start:end]
	if page == nil {
		page = []any{}
	}
	out["value"] = page
	return http.StatusOK, out
}

// store keeps a PUT body as the resource with what the server adds.
func (s *Server) store(p path, id string, in map[string]any) *stored {
	key := strings.ToLower(id)
	old := s.resources[key]
	obj := clone(in)
	if old != nil {
		id = old.obj["id"].(string) // the first PUT's casing stays
	} else {
		s.order = append(s.order, key)
	}
	s.serial++
	obj["id"] = id
	obj["name"] = p.name
	obj["type"] = p.resourceType
	obj["etag"] = s.etag()
	if loc, ok := obj["location"].(string); ok {
		obj["location"] = normaliseLocation(loc)
	}
	created := s.now
	if old != nil {
		if sd, ok := old.obj["systemData"].(map[string]any); ok {
			if t, err := time.Parse(time.RFC3339, fmt.Sprint(sd["createdAt"])); err == nil {
				created = t
			}
		}
	}
	obj["systemData"] = map[string]any{
		"createdBy": "captf-test@example.com", "createdByType": "User", "createdAt": created.Format(time.RFC3339),
		"lastModifiedBy": "captf-test@example.com", "lastModifiedByType": "User", "lastModifiedAt": s.now.Add(time.Duration(s.serial) * time.Second).Format(time.RFC3339),
	}
	props := properties(obj)
	props["provisioningState"] = "Succeeded"
	applyDefaults(p, obj, props, created)
	r := &stored{obj: obj, deleting: -1}
	s.resources[key] = r
	return r
}

func (s *Server) etag() string {
	return fmt.Sprintf(`W/"datetime'%s'"`, s.now.Add(time.Duration(s.serial)*time.Second).Format("2006-01-02T15%3A04%3A05.0000000Z"))
}

// properties returns obj's properties object, made when missing.
func properties(obj map[string]any) map[string]any {
	props, ok := obj["properties"].(map[string]any)
	if !ok {
		props = map[string]any{}
		obj["properties"] = props
	}
	return props
}

// applyDefaults adds what ARM's resource providers add to a stored
// resource of a few types, and drops the write-only properties.
func applyDefaults(p path, obj, props map[string]any, created time.Time) {
	switch strings.ToLower(p.resourceType) {
	case "microsoft.storage/storageaccounts":
		if sku, ok := obj["sku"].(map[string]any); ok {
			tier := "Standard"
			if name, _ := sku["name"].(string); strings.HasPrefix(name, "Premium") {
				tier = "Premium"
			}
			sku["tier"] = tier
		}
		if kind, _ := obj["kind"].(string); kind == "StorageV2" || kind == "BlobStorage" {
			if _, ok := props["accessTier"]; !ok {
				props["accessTier"] = "Hot"
			}
		}
		if _, ok := props["supportsHttpsTrafficOnly"]; !ok {
			props["supportsHttpsTrafficOnly"] = true
		}
		endpoints := map[string]any{}
		for _, svc := range []string{"blob", "queue", "table", "file", "dfs", "web"} {
			endpoints[svc] = "https://" + p.name + "." + svc + ".core.windows.net/"
		}
		props["primaryEndpoints"] = endpoints
		props["primaryLocation"] = obj["location"]
		props["statusOfPrimary"] = "available"
		props["creationTime"] = created.Format("2006-01-02T15:04:05.0000000Z")
		props["encryption"] = map[string]any{"keySource": "Microsoft.Storage", "services": map[string]any{"blob": map[string]any{"enabled": true, "keyType": "Account"}}}
	case "microsoft.sql/servers":
		delete(props, "administratorLoginPassword")
		props["fullyQualifiedDomainName"] = p.name + ".database.windows.net"
		props["state"] = "Ready"
	case "microsoft.keyvault/vaults/secrets":
		delete(props, "value")
		props["secretUri"] = "https://" + strings.Split(p.fullName, "/")[0] + ".vault.azure.net/secrets/" + p.name
		props["attributes"] = map[string]any{"enabled": true, "created": json.Number(strconv.FormatInt(created.Unix(), 10))}
	}
}

// normaliseLocation writes a location as ARM returns it: "West Europe" is
// "westeurope".
func normaliseLocation(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, " ", ""))
}

// clone deep-copies a JSON value.
func clone[T any](v T) T {
	return cloneAny(v).(T)
}

func cloneAny(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneAny(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneAny(e)
		}
		return out
	default:
		return v
	}
}
