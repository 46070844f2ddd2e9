package changeset

import (
	"fmt"
	"strconv"
	"strings"
)

// NoteMarker is the first line of every note, hidden when rendered, so a
// bot finds the comment it posted before and updates it.
const NoteMarker = "<!-- captf:preview -->"

// MaxNoteLength is the most a note may hold, in bytes (so in characters
// too): a pull-request comment on GitHub holds at most 65,536 characters.
const MaxNoteLength = 65536

// maxValueLength caps one before or after value in the note; the document
// holds it whole.
const maxValueLength = 200

// NoteOptions is what a note needs beyond the document.
type NoteOptions struct {
	// ApplyCommand is the exact command that applies this change set.
	ApplyCommand string
	// DocumentFile names the document the note summarises; a truncated
	// note points the reader to it.
	DocumentFile string
	// Title is the heading; "captf preview" when empty.
	Title string
	// Limit caps the note's length; MaxNoteLength when zero.
	Limit int

	// commandLeftOut: ApplyCommand was too long for the note.
	commandLeftOut bool
}

// Note renders the Markdown note of d: the marker, a row per member with
// its status and counts, the digest and the approve command, then the
// grouped summary with destroys and replacements, failures and holes before
// a group per member. Sensitive values are never shown. When the note would
// be longer than the limit, whole groups are dropped from the end and a
// last line says which and where to read them.
func Note(d *Document, o NoteOptions) string {
	limit := o.Limit
	if limit <= 0 {
		limit = MaxNoteLength
	}
	sum := d.Summary
	if sum == nil {
		sum = d.Summarize()
	}
	rows := tableRows(d, sum)
	groups := noteGroups(d)
	head := noteHead(d, o, rows, len(rows))
	total := len(head)
	for _, g := range groups {
		total += len(g.text)
	}
	if total <= limit {
		var b strings.Builder
		b.WriteString(head)
		for _, g := range groups {
			b.WriteString(g.text)
		}
		return b.String()
	}
	// Keep as many rows as fit with every group left out, then as many
	// groups as fit after them. A command too long for the note even so
	// is named instead of shown.
	if len(noteHead(d, o, rows, 0))+len(noteFooter(limit, o, groups)) > limit {
		o.ApplyCommand, o.commandLeftOut = "", true
	}
	keptRows := rowsThatFit(d, o, rows, limit-len(noteFooter(limit, o, groups)))
	head = noteHead(d, o, rows, keptRows)
	kept := 0
	size := len(head)
	for kept < len(groups) && size+len(groups[kept].text)+len(noteFooter(limit, o, groups[kept+1:])) <= limit {
		size += len(groups[kept].text)
		kept++
	}
	var b strings.Builder
	b.WriteString(head)
	for _, g := range groups[:kept] {
		b.WriteString(g.text)
	}
	b.WriteString(noteFooter(limit, o, groups[kept:]))
	if b.Len() > limit {
		// Only a limit smaller than the note's fixed lines (its title,
		// the digest) comes here: cut, on a character's start.
		return cut(b.String(), limit)
	}
	return b.String()
}

// rowsThatFit is how many table rows fit in a head of at most room bytes:
// the head's fixed part, the rows kept and the line counting the others,
// each measured once.
func rowsThatFit(d *Document, o NoteOptions, rows []string, room int) int {
	size := len(noteHead(d, o, nil, 0)) // no rows, no line about them
	keep := 0
	for keep < len(rows) {
		next := size + len(rows[keep])
		more := 0
		if keep+1 < len(rows) {
			more = len(moreMembers(len(rows) - keep - 1))
		}
		if next+more > room {
			break
		}
		size = next
		keep++
	}
	return keep
}

// cut shortens s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

type noteGroup struct {
	title string
	text  string
}

func noteHead(d *Document, o NoteOptions, rows []string, keep int) string {
	var b strings.Builder
	title := o.Title
	if title == "" {
		title = "captf preview"
	}
	fmt.Fprintf(&b, "%s\n### %s\n\n", NoteMarker, title)
	if len(d.Members) == 0 {
		b.WriteString("No components to plan.\n")
	} else {
		b.WriteString("| member | capability | status | create | update | replace | delete |\n")
		b.WriteString("|---|---|---|--:|--:|--:|--:|\n")
		for _, r := range rows[:keep] {
			b.WriteString(r)
		}
		if keep < len(rows) {
			b.WriteString(moreMembers(len(rows) - keep))
		}
	}
	fmt.Fprintf(&b, "\nDigest: %s\n", code(d.Digest))
	switch {
	case o.ApplyCommand != "":
		fmt.Fprintf(&b, "\nTo apply exactly this change set:\n\n```sh\n%s\n```\n", o.ApplyCommand)
	case o.commandLeftOut:
		b.WriteString("\nThe command that applies exactly this change set is too long for this note: `captf preview apply --expect-digest` with the digest above and the options this plan ran with.\n")
	}
	return b.String()
}

func moreMembers(n int) string {
	return fmt.Sprintf("\n%d more members are left out of this table.\n", n)
}

func tableRows(d *Document, sum *Summary) []string {
	counts := make(map[string]MemberCounts, len(sum.Members))
	for _, c := range sum.Members {
		counts[c.Name] = c
	}
	rows := make([]string, 0, len(d.Members))
	for _, m := range d.Members {
		c := counts[m.Name]
		n := func(v int) string {
			if !c.Known {
				return "?"
			}
			return strconv.Itoa(v)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |\n",
			cell(code(m.Name)), cell(m.Capability), m.Status, n(c.Create), n(c.Update), n(c.Replace), n(c.Delete)))
	}
	return rows
}

// noteFooter says which groups were left out and where the whole change
// set is; empty when none was.
func noteFooter(limit int, o NoteOptions, left []noteGroup) string {
	if len(left) == 0 {
		return ""
	}
	names := make([]string, 0, 5)
	for i, g := range left {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(left)-5))
			break
		}
		names = append(names, g.title)
	}
	where := "the change-set document (`captf preview plan --json`)"
	if o.DocumentFile != "" {
		where = code(o.DocumentFile)
	}
	return fmt.Sprintf("\n---\n%d groups are left out to keep this note under %d characters: %s. The whole change set is in %s.\n",
		len(left), limit, strings.Join(names, ", "), where)
}

// noteGroups renders the grouped summary: destroys and replacements,
// failures, holes, then one group per member.
func noteGroups(d *Document) []noteGroup {
	var groups []noteGroup
	var b strings.Builder
	for _, e := range d.Entries {
		if e.Action == ActionDelete || e.Action == ActionReplace {
			fmt.Fprintf(&b, "- %s %s in %s\n", e.Action, code(e.Address), code(e.Member))
		}
	}
	groups = appendGroup(groups, "Destroys and replacements", &b)
	for _, m := range d.Members {
		if m.Status == StatusFailed {
			fmt.Fprintf(&b, "- %s (%s): %s\n", code(m.Name), m.Capability, oneLine(m.Error))
		}
	}
	groups = appendGroup(groups, "Failures", &b)
	for _, m := range d.Members {
		if m.Status == StatusHeld {
			fmt.Fprintf(&b, "- %s is held until its upstream applied; then it is planned again and needs its own approval. It waits on %s.\n",
				code(m.Name), codeList(m.UnknownInputs))
		}
		for _, h := range m.Holes {
			if h.Address != "" {
				fmt.Fprintf(&b, "- %s %s: %s\n", code(m.Name), code(h.Address), oneLine(h.Reason))
			} else {
				fmt.Fprintf(&b, "- %s: %s\n", code(m.Name), oneLine(h.Reason))
			}
		}
	}
	groups = appendGroup(groups, "Holes", &b)

	entries := make(map[string][]Entry)
	for _, e := range d.Entries {
		entries[e.Member] = append(entries[e.Member], e)
	}
	effects := make(map[string][]SideEffect)
	for _, s := range d.SideEffects {
		effects[s.Member] = append(effects[s.Member], s)
	}
	for _, m := range d.Members {
		title := fmt.Sprintf("%s (%s)", code(m.Name), m.Capability)
		memberGroup(&b, &m, entries[m.Name], effects[m.Name])
		groups = append(groups, noteGroup{title: code(m.Name), text: "\n#### " + title + "\n\n" + b.String()})
		b.Reset()
	}
	return groups
}

func appendGroup(groups []noteGroup, title string, b *strings.Builder) []noteGroup {
	if b.Len() == 0 {
		return groups
	}
	groups = append(groups, noteGroup{title: title, text: "\n#### " + title + "\n\n" + b.String()})
	b.Reset()
	return groups
}

func memberGroup(b *strings.Builder, m *Member, entries []Entry, effects []SideEffect) {
	switch m.Status {
	case StatusFailed:
		b.WriteString("The plan failed; see Failures.\n")
		return
	case StatusHeld:
		b.WriteString("Held: planned once its upstream applied.\n")
		return
	}
	unchanged := 0
	for _, e := range entries {
		if e.Action == ActionNoOp || e.Action == ActionRead {
			unchanged++
			continue
		}
		fmt.Fprintf(b, "- %s %s", e.Action, code(e.Address))
		if e.Importing {
			b.WriteString(", importing")
		}
		if e.Disruption != "" {
			fmt.Fprintf(b, ", disruption %s", e.Disruption)
		}
		if e.Note != "" {
			fmt.Fprintf(b, " (%s)", oneLine(e.Note))
		}
		b.WriteString("\n")
		for _, a := range e.Attributes {
			fmt.Fprintf(b, "  - %s%s\n", code(a.Name), attributeValues(&a))
		}
	}
	for _, s := range effects {
		fmt.Fprintf(b, "- %s %s", s.Kind, code(s.Address))
		if s.Detail != "" {
			fmt.Fprintf(b, " (%s)", oneLine(s.Detail))
		}
		b.WriteString("\n")
	}
	if unchanged > 0 {
		fmt.Fprintf(b, "- %d unchanged (no-op or read), not listed\n", unchanged)
	}
	if b.Len() == 0 {
		b.WriteString("No changes.\n")
	}
}

// attributeValues renders ": before → after" for an attribute that has
// values. A sensitive attribute shows none, whatever it holds.
func attributeValues(a *Attribute) string {
	var s string
	switch {
	case a.Sensitive:
		s = ": (sensitive)"
	case a.Unknown && a.Before == nil:
		s = ": " + knownAfterApply
	case a.Unknown:
		s = ": " + value(a.Before) + " → " + knownAfterApply
	case a.Before != nil || a.After != nil:
		s = ": " + value(a.Before) + " → " + value(a.After)
	}
	if a.ForcesReplacement {
		s += " (forces replacement)"
	}
	return s
}

// knownAfterApply stands for a value known only after apply, as terraform
// shows it (in a code span, so Markdown does not take it for a tag).
var knownAfterApply = code("<known after apply>")

func value(raw []byte) string {
	if raw == nil {
		return "(none)"
	}
	s := string(raw)
	if len(s) > maxValueLength {
		short := cut(s, maxValueLength)
		return code(short) + fmt.Sprintf(" (and %d more bytes)", len(s)-len(short))
	}
	return code(s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// code renders s as a Markdown code span, fenced with more backticks than
// any run inside it.
func code(s string) string {
	if s == "" {
		return "(none)"
	}
	s = strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
	longest, run := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 || strings.HasPrefix(s, " ") && strings.HasSuffix(s, " ") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

func codeList(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = code(s)
	}
	return strings.Join(out, ", ")
}

// cell escapes what would end a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// oneLine keeps a text on one line of Markdown.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\r", " ")), " ")
}
