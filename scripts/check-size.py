#!/usr/bin/env python3
"""Fails when a function or a source file of the tree is too long (DESIGN.md: functions under
~80 lines, source files under ~600).

usage: scripts/check-size.py [--max-function N] [--max-file N] [--list] [PATH...]

PATHs (files or folders; default: core models pipelines reports harness tests bench) are searched
for C++ and CUDA sources (.cpp .h .cu .cuh) that git tracks or would track (ignored files such as
build folders and virtual environments are left out). Prints one line per offender,
`file:line: function NAME is N lines (at most 80)` or `file:1: file is N lines (at most 600)`,
and exits 1 when there is any; 2 when a file cannot be scanned (its braces do not balance).
--list prints every function found with its length instead.

A function's length is that of its whole definition as it stands in the file: from the line where
its declaration starts (return type, template header and attributes included, comments before it
not) to the line of its closing brace, blank and comment lines included. A file's length is its
number of lines.

How definitions are found: a tokenizer that knows comments, string and character literals (raw
strings and digit separators included) and preprocessor lines (skipped) leaves the braces and
parentheses of the code alone; at namespace and class scope a `{` opens a function body when the
declaration before it ends in a parameter list (after its parentheses at most qualifiers, a
trailing return type or a constructor's initializers), a namespace or class body when it begins
with `namespace`, `extern "C"`, `class`, `struct`, `union` or `enum`, and otherwise is an
initializer, which belongs to the declaration. Lambdas and local classes count as part of the
function that holds them; a lambda that initializes a variable at namespace scope counts as a
function of its own. Test macros (TEST, TEST_P, ...) are functions.
"""
import argparse
import bisect
import os
import re
import subprocess
import sys

ROOTS = ["core", "models", "pipelines", "reports", "harness", "tests", "bench"]
EXTENSIONS = (".cpp", ".h", ".cu", ".cuh")

TOKEN = re.compile(
    r"""
    (?P<pp>(?m:^)[ \t]*\#(?:[^\n\\]|\\(?:.|\n))*)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^()\\\s"]{0,16})\((?:.|\n)*?\)(?P=delim)")
  | (?P<string>(?:u8|u|U|L)?"(?:[^"\\\n]|\\(?:.|\n))*")
  | (?P<number>\.?[0-9](?:'?[0-9A-Za-z_]|[eEpP][+-]|\.)*)
  | (?P<char>(?:u8|u|U|L)?'(?:[^'\\\n]|\\.)+')
  | (?P<word>[A-Za-z_]\w*)
  | (?P<space>\s+)
  | (?P<punct>->|::|\.\.\.|.)
    """,
    re.VERBOSE | re.DOTALL,
)

ACCESS = {"public", "private", "protected"}
CLASS_KEYS = {"class", "struct", "union", "enum"}
# What may follow a function's parameter list before its body.
QUALIFIERS = {"const", "volatile", "noexcept", "override", "final", "mutable", "constexpr",
              "&", "&&", "try"}


# Words whose parentheses are not a parameter list.
NOT_CALLS = {"...", "sizeof", "alignof", "alignas", "decltype", "noexcept", "requires",
             "__attribute__", "__declspec", "nodiscard", "deprecated", "__launch_bounds__"}


class ScanError(Exception):
    pass


def tokens(text):
    """(kind, text, offset) of the code: no comments, spaces or preprocessor lines."""
    out = []
    for m in TOKEN.finditer(text):
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        if kind in ("pp", "comment", "space"):
            continue
        if kind in ("raw", "string", "char"):
            kind = "literal"
        out.append((kind, m.group(), m.start()))
    return out


def strip_template(head):
    """`head` without leading `template <...>` headers."""
    while head and head[0][1] == "template" and len(head) > 1 and head[1][1] == "<":
        depth, i = 0, 1
        while i < len(head):
            if head[i][1] == "<":
                depth += 1
            elif head[i][1] == ">":
                depth -= 1
                if depth == 0:
                    break
            elif head[i][1] == ">>":
                depth -= 2
            i += 1
        head = head[i + 1:]
    return head


def is_scope(head):
    """'namespace', 'class' or None for a declaration `head` that a `{` follows."""
    words = [t[1] for t in head]
    if words and words[0] in ("namespace", "inline") and "namespace" in words[:2]:
        return "namespace"
    if words[:1] == ["extern"] and len(head) == 2 and head[1][0] == "literal":
        return "namespace"
    body = strip_template(head)
    for kind, text, _ in body:
        if text == "(" or text == "=":
            break
        if text in CLASS_KEYS:
            return "class"
    return None


def after_last_group(head):
    """The tokens after the last top-level (...) or {...} group of `head`, and whether the head
    has a top-level parenthesis at all."""
    depth, last, seen = 0, -1, False
    for i, (_, text, _) in enumerate(head):
        if text in "({":
            depth += 1
            seen = seen or text == "("
        elif text in ")}":
            depth -= 1
            if depth == 0:
                last = i
    return head[last + 1:], seen


def ends_in_initializer_name(head):
    """True when `head` is a constructor's initializer list waiting for a member's braces:
    `Foo() : a_(1), b_` (its last group followed by `:` or `,` and a name)."""
    rest, seen = after_last_group(head)
    if not seen or not rest or rest[0][1] not in (":", ","):
        return False
    return all(t[0] == "word" or t[1] in ("::", "<", ">", ",") for t in rest[1:]) and len(rest) > 1


def is_function(head):
    rest, seen = after_last_group(head)
    if not seen or head[-1][1] == "=":
        return False
    if any(t[1] == "=" for t in rest):
        return False
    arrow = next((i for i, t in enumerate(rest) if t[1] == "->"), len(rest))
    # Qualifiers (and compiler keywords such as __restrict__), then a trailing return type.
    return all(t[1] in QUALIFIERS or t[0] == "word" and t[1].startswith("__")
               for t in rest[:arrow])


def qualified_name(body, j):
    """The name ending at body[j]: words joined by `::`, a destructor's `~` with its word."""
    parts = []
    while j >= 0 and body[j][0] == "word":
        parts.insert(0, body[j][1])
        j -= 1
        if j >= 0 and body[j][1] == "~":
            parts.insert(0, "~")
            j -= 1
        if j < 1 or body[j][1] != "::":
            break
        j -= 1
        if body[j][1] == ">":  # a template's arguments, left out of the name
            depth = 0
            while j >= 0:
                depth += body[j][1] == ">"
                depth -= body[j][1] == "<"
                j -= 1
                if depth == 0:
                    break
        if j < 0 or body[j][0] != "word":
            break
        parts.insert(0, "::")
    return "".join(parts)


def function_name(head):
    """The name before the parameter list (an operator's with its symbol); a macro's
    arguments with it (TEST(Suite, Name))."""
    body = strip_template(head)
    words = [t[1] for t in body]
    if "operator" in words:
        k = words.index("operator")
        params = k + 3 if words[k + 1:k + 3] == ["(", ")"] else words.index("(", k + 1)
        return qualified_name(body, k) + " ".join(words[k + 1:params]).replace(" ", "")
    # The first parenthesis that is not an operand of sizeof, decltype or an attribute.
    i = next((i for i, w in enumerate(words) if w == "(" and i > 0
              and words[i - 1] not in NOT_CALLS), None)
    if i is None:
        return "(unnamed)"
    name = qualified_name(body, i - 1) or "(lambda)"
    if re.fullmatch(r"(\w+_)?TEST(_\w+)?", name):  # GoogleTest's TEST, TEST_F, TYPED_TEST_P, ...
        depth, args = 0, []
        for t in words[i:]:
            depth += t == "("
            depth -= t == ")"
            args.append(t + " " if t == "," else t)
            if depth == 0:
                break
        name += "".join(args)
    return name


def lambda_start(toks, brace):
    """The index of the `[` that introduces the lambda whose body opens at toks[brace], or None
    when that `{` opens no lambda."""
    j = brace - 1
    while j >= 0 and toks[j][1] in QUALIFIERS | {"mutable"}:
        j -= 1
    if j >= 0 and toks[j][1] == ")":
        depth = 0
        while j >= 0:
            depth += toks[j][1] == ")"
            depth -= toks[j][1] == "("
            if depth == 0:
                break
            j -= 1
        j -= 1
    if j < 0 or toks[j][1] != "]":
        return None
    depth = 0
    while j >= 0:
        depth += toks[j][1] == "]"
        depth -= toks[j][1] == "["
        if depth == 0:
            return None if j > 0 and toks[j - 1][1] == "operator" else j
        j -= 1
    return None


class Scanner:
    def __init__(self, path, text):
        self.path = path
        self.toks = tokens(text)
        self.lines = [i for i, c in enumerate(text) if c == "\n"]
        self.i = 0
        self.functions = []  # (line, length, name)

    def line(self, offset):
        return bisect.bisect_right(self.lines, offset - 1) + 1

    def fail(self, offset, what):
        raise ScanError(f"{self.path}:{self.line(offset)}: {what}")

    def skip_group(self):
        """From a `{`, past its matching `}`; returns the `}` token."""
        open_at = self.toks[self.i][2]
        depth = 0
        while self.i < len(self.toks):
            text = self.toks[self.i][1]
            depth += text == "{"
            depth -= text == "}"
            self.i += 1
            if depth == 0:
                return self.toks[self.i - 1]
        self.fail(open_at, "this brace is never closed")

    def scope(self, closing):
        """Declarations up to the `}` that closes this scope (or the end of the file)."""
        head, parens = [], 0
        while self.i < len(self.toks):
            tok = self.toks[self.i]
            kind, text, offset = tok
            if text == "}" and parens == 0:
                if not closing:
                    self.fail(offset, "a closing brace without its opening one")
                self.i += 1
                return
            if text in "()":
                parens += 1 if text == "(" else -1
            if parens == 0 and text == ";":
                head = []
                self.i += 1
                continue
            if parens == 0 and text == ":" and len(head) == 1 and head[0][1] in ACCESS:
                head = []
                self.i += 1
                continue
            if text != "{":
                head.append(tok)
                self.i += 1
                continue
            self.brace(head, parens)
            if parens == 0 and self.toks[self.i - 1][1] == "}" and self.ended_declaration:
                head = []
        if closing:
            self.fail(self.toks[-1][2] if self.toks else 0, "a scope that is never closed")

    def brace(self, head, parens):
        """At a `{` after `head`: a scope, a function body or an initializer (kept in head)."""
        self.ended_declaration = False
        start = self.toks[self.i]
        kind = None if parens > 0 or not head else is_scope(head)
        if kind is not None:
            self.i += 1
            self.scope(closing=True)
            # `struct X {...} x;` goes on to its declarators and `;`; a namespace ends here.
            self.ended_declaration = kind == "namespace"
            return
        intro = lambda_start(self.toks, self.i)
        if intro is not None:
            end = self.skip_group()
            first = self.line(self.toks[intro][2])
            self.functions.append((first, self.line(end[2]) - first + 1, "(lambda)"))
            head.extend([start, end])
            return
        if parens == 0 and head and not ends_in_initializer_name(head) and is_function(head):
            end = self.skip_group()
            first = self.line(head[0][2])
            last = self.line(end[2])
            self.functions.append((first, last - first + 1, function_name(head)))
            self.ended_declaration = True
            return
        begin = self.i
        end = self.skip_group()  # an initializer: part of the declaration
        self.lambdas(begin + 1, self.i - 1)
        head.extend([start, end])

    def lambdas(self, begin, end):
        """The outermost lambdas of an initializer's tokens [begin, end) (a table of them) count
        as functions: a `{` after `]`, or after `](...)` and qualifiers or a return type."""
        i = begin
        while i < end:
            if self.toks[i][1] != "{":
                i += 1
                continue
            intro = lambda_start(self.toks, i)
            if intro is None:
                i += 1  # a nested initializer: its lambdas count too
                continue
            self.i = i
            close = self.skip_group()
            first = self.line(self.toks[intro][2])
            self.functions.append((first, self.line(close[2]) - first + 1, "(lambda)"))
            i = self.i
        self.i = end + 1

    def run(self):
        self.scope(closing=False)
        return self.functions


def sources(paths):
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *paths],
        check=True, capture_output=True, text=True).stdout.split("\0")
    return sorted({p for p in listed if p.endswith(EXTENSIONS) and os.path.isfile(p)})


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-function", type=int, default=80)
    parser.add_argument("--max-file", type=int, default=600)
    parser.add_argument("--list", action="store_true", help="every function and its length")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args(argv)
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = sources(args.paths or ROOTS)
    offenders, errors = [], []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > args.max_file:
            offenders.append(f"{path}:1: file is {lines} lines (at most {args.max_file})")
        try:
            functions = Scanner(path, text).run()
        except ScanError as e:
            errors.append(f"{e} (cannot scan this file)")
            continue
        for line, length, name in functions:
            if args.list:
                print(f"{path}:{line}: {length} {name}")
            elif length > args.max_function:
                offenders.append(f"{path}:{line}: function {name} is {length} lines "
                                 f"(at most {args.max_function})")
    for line in offenders + errors:
        print(line)
    print(f"check-size: {len(files)} files, {len(offenders)} over the limits "
          f"(functions {args.max_function} lines, files {args.max_file})"
          + (f", {len(errors)} not scanned" if errors else ""))
    return 2 if errors else 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
