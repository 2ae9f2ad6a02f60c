#!/usr/bin/env python3
"""Finds circles of imports between the modules of each crate.

An edge runs from a module's file to the file of every module it names by
a path (`crate::a::b`, `super::x`, `self::y`, or a child module declared
with `mod`), in `use` items and in code alike. A crate's root (`lib.rs`,
`main.rs`) declares and re-exports its modules, so edges out of it are not
counted; edges into it are. Unit-test modules (`#[cfg(test)] mod … { }`)
are left out: a test may use what is above the module it tests. Prints each circle (its files and what ties
them) and exits 1 if there is one; 0 otherwise.

    scripts/circles.py [CRATE_DIR...]   (default: every workspace member)
"""

import os
import re
import sys

ROOTS = ("lib.rs", "main.rs")
PATH = re.compile(r"\b(crate|super|self)((?:\s*::\s*\w+)+)")
USE = re.compile(r"\buse\s+([^;]+);", re.S)
LEXEMES = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])'", re.S)
TESTS = re.compile(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{")
MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)


def strip(text):
    """The text without comments, string literals and test modules."""
    text = LEXEMES.sub(lambda m: '""' if m.group(0)[0] in "\"'" else "", text)
    while (m := TESTS.search(text)) is not None:
        depth, end = 0, len(text)
        for i in range(m.end() - 1, len(text)):
            depth += text[i] == "{"
            depth -= text[i] == "}"
            if depth == 0:
                end = i + 1
                break
        text = text[: m.start()] + text[end:]
    return text


def modules(src):
    """Module path (a tuple) -> file, for every .rs file under src."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] == "mod" or (len(parts) == 1 and f in ROOTS):
                parts = parts[:-1]
            out.setdefault(tuple(parts), os.path.join(dirpath, f))
    return out


def expand(tree):
    """`a::{b, c::{d}}` -> [a::b, a::c::d] (whitespace removed)."""
    tree = re.sub(r"\s+", "", tree)
    depth, start, parts = 0, 0, []
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    head, body = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    for i, ch in enumerate(body):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [p for part in parts if part for p in expand(head + part)]


def resolve(here, path, mods):
    """The module (a tuple) `path` (a list of names) from module `here` names."""
    base = list(here)
    if path and path[0] == "crate":
        base, path = [], path[1:]
    elif path and path[0] in ("super", "self"):
        while path and path[0] in ("super", "self"):
            if path[0] == "super" and base:
                base.pop()
            path = path[1:]
    full = base + [p for p in path if p not in ("*", "self")]
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in mods:
            return tuple(full[:n])
    return None


def edges(mods):
    """(from file, to file) -> names, for one crate."""
    out = {}
    for here, file in mods.items():
        if os.path.basename(file) in ROOTS:
            continue
        text = strip(open(file, encoding="utf-8").read())
        children = set(MOD.findall(text))
        paths = []
        for use in USE.findall(text):
            paths += expand(use)
        paths += [m.group(1) + re.sub(r"\s+", "", m.group(2)) for m in PATH.finditer(text)]
        paths += [m.group(0) for c in children for m in re.finditer(rf"\b{c}::\w+", text)]
        for p in paths:
            parts = [x.split(" as ")[0] for x in p.split("::")]
            if parts[0] in children:
                parts = ["self"] + parts
            elif parts[0] not in ("crate", "super", "self"):
                continue
            to = resolve(here, parts, mods)
            if to is None or mods[to] == file or to == here[: len(to)] and to != ():
                continue
            out.setdefault((file, mods[to]), set()).add(parts[-1])
    return out


def circles(graph):
    """The strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    nodes = sorted({a for a, _ in graph} | {b for _, b in graph})
    succ = {n: sorted(b for a, b in graph if a == n) for n in nodes}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for n in nodes:
        if n not in index:
            visit(n)
    return found


def members(root):
    text = open(os.path.join(root, "Cargo.toml"), encoding="utf-8").read()
    listed = re.search(r"^members\s*=\s*\[([^\]]*)\]", text, re.M)
    return [os.path.join(root, m) for m in re.findall(r'"([^"]+)"', listed.group(1))]


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    crates = argv or members(root)
    bad = 0
    for crate in crates:
        src = os.path.join(crate, "src")
        if not os.path.isdir(src):
            continue
        graph = edges(modules(src))
        for comp in circles(graph):
            bad += 1
            print(f"circle of imports in {os.path.relpath(crate, root)}: {', '.join(os.path.relpath(f, src) for f in comp)}")
            for a, b in sorted(graph):
                if a in comp and b in comp:
                    names = ", ".join(sorted(graph[(a, b)]))
                    print(f"  {os.path.relpath(a, src)} -> {os.path.relpath(b, src)}: {names}")
    if bad:
        print(f"{bad} circle(s) of imports: break each (a lower module both sides use, or a trait)", file=sys.stderr)
        return 1
    print(f"no circle of imports in {len(crates)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
