#!/usr/bin/env python3
"""tools/gen_api.py - the API reference, generated from safeverbs.h so that it cannot drift.

    gen_api.py OUTDIR     writes OUTDIR/API.md, OUTDIR/man/<function>.3 and OUTDIR/man/safeverbs.7
    gen_api.py --check    regenerates into a temporary directory and compares with docs/: fails
                          (exit 1, saying what and why) when docs/ is stale, when a public function
                          has no entry, or when a comment names a result its code cannot return

Where the text comes from (no per-function configuration: a new section or function of the
header is picked up as it is):
  - Public functions: every `SAFEVERBS_API` declaration before the implementation, grouped by the
    header's `/* >>section` lines. DESCRIPTION is the comment block above the declaration with no
    blank line between them (it may reach past #defines and typedefs; a comment above several
    declarations belongs to all of them) and a comment at the end of the declaration's line. A sentence that starts with
    "Thread safety:" goes to THREAD SAFETY instead (shown only where the header says one).
  - ERRORS: the results the function's code can return, computed from the implementation: the
    SFV_ERR_* names in the function's body, and in the bodies of every function and macro of the
    implementation it calls, transitively (public callees included: sfv_channel_send can return
    what sfv_pending_wait returns). Each result is explained by the sentences of the function's
    comment that name it, or else by the general meaning of that result.
    Limits of the method: it over-approximates (a result a callee returns but the caller
    catches, or a branch that cannot be taken, is still listed), and it sees no call made
    through a function pointer (a scope's fn) nor a result computed at run time other than
    through sfv_result_from_errno (which, being called, contributes its classes).
    It never misses a result named in a body it reaches.
  - RETURN VALUE: from the declared return type; for sfv_result, the library's contract (every
    failure sets sfv_last_error() and zeroes the outputs: the non-const pointer parameters after
    the first, except buffers) with those outputs named.
  - SEE ALSO: the other functions in the same comment group, the functions the comment names,
    and safeverbs(7).
  - safeverbs(7): docs/guide.md, a hand-written walk through a client and a server.
The check also fails when the comment of a function returning sfv_result names an SFV_ERR_*
result that no function of its section can return (a promise of a result that cannot happen).
"""
import os
import re
import sys
import tempfile
import filecmp

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(TOP, "safeverbs.h")
GUIDE = os.path.join(TOP, "docs", "guide.md")

# The general meaning of each result, used when a function's comment says nothing more.
GENERAL = {
    "SFV_ERR_INVALID": "an argument is NULL, out of range or inconsistent, or a verb refused it with EINVAL",
    "SFV_ERR_RESOURCE": "out of memory or of a device resource (a verb failed with ENOMEM, EAGAIN or EMFILE), or a queue or limit is full",
    "SFV_ERR_PERMISSION": "a verb or system call failed with EPERM or EACCES (for registrations: often `ulimit -l`)",
    "SFV_ERR_NOT_FOUND": "what was asked for does not exist (a device, port, GID entry, NUMA node or peer; ENOENT, ENODEV)",
    "SFV_ERR_UNSUPPORTED": "the device, kernel or build does not support it (EOPNOTSUPP)",
    "SFV_ERR_DRIVER": "a verb or system call failed with another errno (kept in sfv_last_error()->errnum)",
    "SFV_ERR_SLICE_TOO_BIG": "a slice is longer than UINT32_MAX bytes",
    "SFV_ERR_SLICE_NOT_WITHIN_BOUNDS": "a slice or element does not lie inside its memory region or remote region",
    "SFV_ERR_WORK": "a work request completed with an error (status, class and hint in the work completion)",
    "SFV_ERR_TIMEOUT": "the deadline passed before the work, the peer or the exchange finished",
    "SFV_ERR_BROKEN": "the channel (or the node's barrier) is in the error state and takes no more work",
    "SFV_ERR_SCOPE_FN": "the scope's function returned a failure",
    "SFV_ERR_SCOPE_AUTOPOLL": "work the scope polled at its end failed",
}
RESULT_RE = re.compile(r"\bSFV_(?:ERR_[A-Z_]+|NOT_DONE)\b")


def strip_code(text):
    """Removes comments and string/char literals (kept as empty quotes) from C text."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: " " if m.group(0).startswith("/") else '""', text, flags=re.S)


def split_header(src):
    lines = src.split("\n")
    impl = next(i for i, l in enumerate(lines) if l.startswith("#if defined(SAFEVERBS_IMPLEMENTATION) && !defined(SAFEVERBS_IMPL_INCLUDED)"))
    return lines[:impl], lines[impl:]


def comment_text(block):
    t = re.sub(r"^\s*/\*+", "", block)
    t = re.sub(r"\*+/\s*$", "", t)
    return t


def parse_decls(lines):
    """The public functions: [{name, section, decl, comment, group}] in header order."""
    funcs, section, comment, group = [], None, None, None
    started = False
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^/\* >>([\w -]+?) -+ \*/", line)
        if m:
            section, comment, group, started = m.group(1).strip(), None, None, True
            i += 1
            continue
        if not started:
            i += 1
            continue
        if line.startswith("/*"):
            block = [line]
            while "*/" not in block[-1]:
                i += 1
                block.append(lines[i])
            comment, group = comment_text("\n".join(block)), None
            i += 1
            continue
        if re.match(r"(SFV_NODISCARD )?SAFEVERBS_API", line):
            decl = [line]
            while not re.search(r";\s*(/\*.*\*/\s*)?$", decl[-1]):
                i += 1
                decl.append(lines[i])
            text = "\n".join(decl)
            trailing = ""
            tm = re.search(r";\s*/\*(.*)\*/\s*$", text, re.S)
            if tm:
                trailing = " ".join(tm.group(1).split())
                text = text[: tm.start()] + ";"
            code = " ".join(strip_code(text).split())
            nodiscard = code.startswith("SFV_NODISCARD ")
            code = re.sub(r"^(SFV_NODISCARD\s+)?SAFEVERBS_API\s+", "", code)
            name = re.search(r"\b(sfv_\w+)\s*\(", code).group(1)
            if group is None:
                group = []
            group.append(name)
            funcs.append({"name": name, "section": section, "decl": code, "comment": comment or "",
                          "trailing": trailing, "group": group, "nodiscard": nodiscard})
            i += 1
            continue
        if line.strip() == "":   # a comment reaches past #defines and typedefs to a blank line
            comment, group = None, None
        i += 1
    return funcs


def parse_impl(lines):
    """Bodies of the implementation's functions and function-like macros, by name."""
    src = strip_code("\n".join(lines))
    bodies = {}
    # Function-like macros (multi-line through backslashes).
    for m in re.finditer(r"^#\s*define\s+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", src, re.M):
        bodies[m.group(1)] = bodies.get(m.group(1), "") + m.group(3)
    # Function definitions: a line at column 0, the first sfv_ identifier followed by '(',
    # then '{' before any ';'.
    for m in re.finditer(r"^(?![#\s}/])[^\n;{]*?\b(sfv_\w+)\s*\(", src, re.M):
        name, j = m.group(1), m.end()
        depth = 1
        while j < len(src) and depth:
            depth += {"(": 1, ")": -1}.get(src[j], 0)
            j += 1
        k = j
        while k < len(src) and src[k] in " \t\n":
            k += 1
        if k >= len(src) or src[k] != "{":
            continue
        depth, e = 0, k
        while e < len(src):
            c = src[e]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            e += 1
        bodies[name] = bodies.get(name, "") + src[k:e + 1]
    return bodies


def results_of(name, bodies, memo, stack=()):
    if name in memo:
        return memo[name]
    if name in stack or name not in bodies:
        return set()
    body = bodies[name]
    out = set(RESULT_RE.findall(body))
    for callee in set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", body)):
        if callee != name and callee in bodies:
            out |= results_of(callee, bodies, memo, stack + (name,))
    if not stack:
        memo[name] = out
    return out


def sentences(text):
    flat = " ".join(text.split())
    parts = re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Za-z(`*\"])", flat)
    return [p for p in parts if p]


def params_of(decl):
    inner = decl[decl.index("(") + 1: decl.rindex(")")]
    if inner.strip() in ("", "void"):
        return []
    return [p.strip() for p in inner.split(",")]


def outputs_of(decl):
    outs = []
    for k, p in enumerate(params_of(decl)):
        if k == 0 or "*" not in p or p.startswith("const ") or re.match(r"(void|char)\s*\*", p):
            continue
        outs.append(re.search(r"(\w+)\s*(\[\])?$", p).group(1))
    return outs


def build(funcs, bodies):
    memo = {}
    names = {f["name"] for f in funcs}
    for f in funcs:
        res = results_of(f["name"], bodies, memo)
        # SFV_NOT_DONE is a "not yet", not an error: listed only where the function's own body
        # returns it (a blocking call's callees poll, but it never returns "not yet" itself).
        if "SFV_NOT_DONE" not in bodies.get(f["name"], ""):
            res.discard("SFV_NOT_DONE")
        f["results"] = sorted(res, key=lambda r: RESULT_ORDER.get(r, 99))
        text = " ".join(x for x in (f["comment"], f["trailing"]) if x)
        desc, thread = [], []
        for s in sentences(text):
            (thread if s.lower().startswith("thread safety:") else desc).append(s)
        f["desc"] = " ".join(desc)
        f["thread"] = " ".join(t[len("thread safety:"):].strip() for t in thread)
        f["sentences"] = sentences(text)
        named = set(re.findall(r"\b(sfv_\w+)\b", text)) & names
        f["see"] = [n for n in f["group"] if n != f["name"]] + sorted(n for n in named if n != f["name"] and n not in f["group"])
    return funcs


RESULT_ORDER = {}


def result_list(src):
    out = []
    for m in re.finditer(r'X\((SFV_\w+), (-?\d+), "([^"]*)"\)', src):
        out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def errors_of(f):
    rows = []
    for r in f["results"]:
        if r == "SFV_NOT_DONE":
            continue
        why = [s for s in f["sentences"] if re.search(r"\b" + r + r"\b", s)]
        text = " ".join(why) if why else GENERAL.get(r, "") + "."
        if why and r == "SFV_ERR_DRIVER":  # the catch-all of verbs' errnos: its general meaning holds beside any special case
            text = GENERAL.get(r, "") + ". " + text
        rows.append((r, text))
    return rows


def return_text(f):
    ret = f["decl"][: f["decl"].index(f["name"] + "(")].strip()
    if ret == "sfv_result":
        outs = outputs_of(f["decl"])
        t = "SFV_OK on success"
        if "SFV_NOT_DONE" in f["results"]:
            t += ", SFV_NOT_DONE (not an error) when the work is not complete yet"
        t += "; otherwise one of the negative results under ERRORS, with sfv_last_error() set on this thread"
        if outs:
            t += " and the outputs (" + ", ".join("`%s`" % o for o in outs) + ") zeroed (NULL for handles)"
        t += "."
        if f.get("nodiscard"):
            t += " The result must be used: declared SFV_NODISCARD."
        return t
    if ret == "void":
        return "None."
    return "A value of type `%s` (see DESCRIPTION); this function does not return an sfv_result and sets no sfv_last_error()." % ret


def render_md(funcs):
    out = ["# safeverbs API reference", "",
           "Generated by `tools/gen_api.py` from `safeverbs.h` (`make docs`); `make check-docs` fails",
           "when this file is stale. Do not edit by hand: edit the header's comments. The same text is",
           "installed as man pages (`man sfv_open_device`); `man 7 safeverbs` walks a client and a server",
           "through the library. ERRORS lists what the implementation can return, computed from the code",
           "(see `tools/gen_api.py` for the method and its limits).", ""]
    sections = []
    for f in funcs:
        if f["section"] not in sections:
            sections.append(f["section"])
    out.append("Sections: " + ", ".join("[%s](#%s)" % (s, re.sub(r"[^a-z0-9 -]", "", s).replace(" ", "-")) for s in sections))
    out.append("")
    for s in sections:
        out += ["## " + s, ""]
        for f in (f for f in funcs if f["section"] == s):
            out += ["### " + f["name"], "", "```c", f["decl"], "```", ""]
            out += ["**Description.** " + (f["desc"] or "No comment in the header beyond the declaration: the name, the types and the conventions of its section and of `safeverbs(7)` are its contract."), ""]
            out += ["**Return value.** " + return_text(f), ""]
            errs = errors_of(f)
            if errs:
                out += ["**Errors.**", ""] + ["- `%s`: %s" % e for e in errs] + [""]
            elif f["decl"].startswith("sfv_result"):
                out += ["**Errors.** None: it cannot fail.", ""]
            if f["thread"]:
                out += ["**Thread safety.** " + f["thread"], ""]
            see = ["`%s`" % n for n in f["see"]] + ["`safeverbs(7)`"]
            out += ["**See also.** " + ", ".join(see), ""]
    return "\n".join(out)


def roff(text):
    text = text.replace("\\", "\\e")
    text = re.sub(r"`([^`]*)`", r"\\fB\1\\fR", text)
    return "\n".join(("\\&" + l if l.startswith((".", "'")) else l) for l in text.split("\n"))


def render_man(f, version):
    n = f["name"]
    out = ['.TH %s 3 "" "safeverbs %s" "safeverbs"' % (n.upper(), version), ".SH NAME",
           "%s \\- %s" % (n, roff(f["section"])), ".SH SYNOPSIS", ".nf", ".B #include <safeverbs.h>", ".PP",
           roff(f["decl"]), ".fi", ".PP", "Link with \\fI$(pkg-config --libs safeverbs)\\fR.",
           ".SH DESCRIPTION", roff(f["desc"] or "No comment in the header beyond the declaration."),
           ".SH RETURN VALUE", roff(return_text(f))]
    errs = errors_of(f)
    if errs:
        out.append(".SH ERRORS")
        for r, why in errs:
            out += [".TP", ".B " + r, roff(why)]
    if f["thread"]:
        out += [".SH THREAD SAFETY", roff(f["thread"])]
    out += [".SH SEE ALSO", ",\n".join(".BR %s (3)" % s for s in f["see"]) + (",\n" if f["see"] else "") + ".BR safeverbs (7)"]
    return "\n".join(out) + "\n"


def render_guide(md, version):
    out = ['.TH SAFEVERBS 7 "" "safeverbs %s" "safeverbs"' % version]
    code = False
    for line in md.split("\n"):
        if line.startswith("```"):
            out.append(".fi" if code else ".nf")
            code = not code
            continue
        if code:
            out.append(roff(line) if line else "")
        elif line.startswith("# "):
            out += [".SH NAME", roff(line[2:])]
        elif line.startswith("## "):
            out.append(".SH " + roff(line[3:].upper()))
        elif line.strip() == "":
            out.append(".PP")
        else:
            out.append(roff(line))
    return "\n".join(out) + "\n"


def generate(outdir):
    src = open(HEADER).read()
    decl_lines, impl_lines = split_header(src)
    for k, (name, _, _) in enumerate(result_list(src)):
        RESULT_ORDER[name] = k
    funcs = build(parse_decls(decl_lines), parse_impl(impl_lines))
    version = re.search(r'#define SAFEVERBS_VERSION_STRING "([^"]+)"', src).group(1)
    os.makedirs(os.path.join(outdir, "man"), exist_ok=True)
    with open(os.path.join(outdir, "API.md"), "w") as fh:
        fh.write(render_md(funcs))
    for f in funcs:
        with open(os.path.join(outdir, "man", f["name"] + ".3"), "w") as fh:
            fh.write(render_man(f, version))
    if os.path.exists(GUIDE):
        with open(os.path.join(outdir, "man", "safeverbs.7"), "w") as fh:
            fh.write(render_guide(open(GUIDE).read(), version))
    return funcs, decl_lines, impl_lines


def check():
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        funcs, decl_lines, impl_lines = generate(tmp)
        # Every public declaration has an entry (the parser missed none).
        ndecl = sum(1 for l in decl_lines if re.match(r"(SFV_NODISCARD )?SAFEVERBS_API", l))
        if ndecl != len(funcs):
            problems.append("%d SAFEVERBS_API declarations but %d entries: the generator missed some" % (ndecl, len(funcs)))
        names = {f["name"] for f in funcs}
        for m in re.finditer(r"^SAFEVERBS_API[^(]*?\b(sfv_\w+)\s*\(", "\n".join(impl_lines), re.M):
            if m.group(1) not in names:
                problems.append("%s is defined SAFEVERBS_API but has no declaration (and no entry)" % m.group(1))
        # A comment promises only results its functions can return. A comment often speaks of
        # its neighbours too (the pending handles' comment of the blocking calls' timeouts), so
        # the bound is what any sfv_result function of the same section can return.
        seen = set()
        for f in funcs:
            key = id(f["group"])
            if key in seen or not f["decl"].startswith("sfv_result"):
                continue
            seen.add(key)
            can = set()
            for g in funcs:
                if g["section"] == f["section"]:
                    can |= set(g["results"])
            text = f["comment"] + " " + f["trailing"]
            for r in sorted(set(re.findall(r"\bSFV_ERR_[A-Z_]+\b", text)) - can):
                problems.append("the comment of %s names %s, which its code cannot return" % ("/".join(f["group"]), r))
        # The CONTENTS block lists every ">>name" anchor that starts a part, and only those.
        header = open(HEADER).read()
        block = header[header.index("CONTENTS"):header.index("LAYERS")]
        block = block[block.index("\n"):]  # past the title line, which names ">>name" itself
        listed = set()
        for piece in block.split(">>")[1:]:
            m = re.match(r"[a-z][a-z -]*[a-z]", piece)
            if m:
                listed.add(m.group(0))
        anchors = set(re.findall(r"^/\* >>([a-z][a-z -]*[a-z])", header, re.M))
        for a in sorted(anchors - listed):
            problems.append("the anchor >>%s is not in the CONTENTS block" % a)
        for a in sorted(listed - anchors):
            problems.append("CONTENTS lists >>%s, which no part starts with" % a)
        # docs/ is what the header gives now.
        docs = os.path.join(TOP, "docs")
        want = ["API.md"] + ["man/" + n for n in sorted(os.listdir(os.path.join(tmp, "man")))]
        for rel in want:
            have = os.path.join(docs, rel)
            if not os.path.exists(have):
                problems.append("docs/%s is missing (a function without its entry): run make docs" % rel)
            elif not filecmp.cmp(have, os.path.join(tmp, rel), shallow=False):
                problems.append("docs/%s is stale (the header changed): run make docs" % rel)
        extra = set("man/" + n for n in os.listdir(os.path.join(docs, "man"))) - set(want) if os.path.isdir(os.path.join(docs, "man")) else set()
        for rel in sorted(extra):
            problems.append("docs/%s has no function in the header any more: run make docs" % rel)
    for p in problems:
        print("check-docs: " + p)
    print("check-docs: %d public functions, %d problems" % (len(funcs), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        sys.exit(check())
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    funcs, _, _ = generate(sys.argv[1])
    print("gen_api: %d functions into %s" % (len(funcs), sys.argv[1]))
