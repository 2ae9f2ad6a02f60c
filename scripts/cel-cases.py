#!/usr/bin/env python3
"""Extracts cel-spec's conformance cases for what vmaas's filter documents.

Usage: scripts/cel-cases.py CEL_SPEC_CHECKOUT > model/tests/cel-spec/cases.jsonl

Reads tests/simple/testdata/*.textproto of a cel-spec checkout and writes one
JSON line per case of the sections listed below: its name, its expression,
and the value it must have (or that it must fail). Cases that need
bindings, a container, protobuf messages, bytes or type values are left out
(the filter has none of those), and so is every case of a section not listed.
"""
import json
import re
import subprocess
import sys

SECTIONS = {
    "logic": ["conditional", "AND", "OR", "NOT"],
    "comparisons": ["eq_literal", "ne_literal", "lt_literal", "gt_literal", "lte_literal", "gte_literal", "in_list_literal", "in_map_literal"],
    "string": ["size", "starts_with", "ends_with", "concatenation", "contains"],
    "timestamps": ["timestamp_conversions", "timestamp_equality", "timestamp_arithmetic", "comparisons"],
    "fields": ["map_fields", "map_has", "quoted_map_fields"],
}
SKIP = re.compile(r"TestAllTypes|google\.protobuf|type\(|dyn\(|\bb['\"]|bytes\(|\.getTimezone|cel\.expr|optional")
TOKEN = re.compile(r'\s+|#[^\n]*|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[{}:\[\],]|[^\s{}:\[\],"\']+')


ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v", "\\": b"\\", "'": b"'", '"': b'"', "?": b"?"}


def unquote(s):
    """A textproto string literal's text: C escapes, octal and hex bytes, \\u code points."""
    body, out, i = s[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = body[i + 1]
        if e in ESCAPES:
            out += ESCAPES[e]
            i += 2
        elif e in "xX":
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        elif e in "uU":
            n = 4 if e == "u" else 8
            out += chr(int(body[i + 2:i + 2 + n], 16)).encode("utf-8")
            i += 2 + n
        else:
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
    return out.decode("utf-8")


def parse(tokens, i=0):
    """A textproto message as a list of (field, value) from tokens[i]; returns (fields, next)."""
    out = []
    while i < len(tokens) and tokens[i] != "}":
        name = tokens[i]
        i += 1
        if tokens[i] == ":":
            i += 1
        if tokens[i] == "{":
            value, i = parse(tokens, i + 1)
            i += 1
        elif tokens[i] == "[":
            value, i = [], i + 1
            while tokens[i] != "]":
                if tokens[i] != ",":
                    value.append(tokens[i])
                i += 1
            i += 1
        else:
            value = tokens[i]
            i += 1
            while i < len(tokens) and tokens[i][0] in "\"'" and value[0] in "\"'":
                value = '"' + unquote(value) + unquote(tokens[i]) + '"'
                i += 1
        out.append((name, value))
    return out, i


def field(msg, name):
    return next((v for k, v in msg if k == name), None)


def expected(test):
    value = field(test, "value")
    if value is None:
        return {"error": True} if field(test, "eval_error") is not None else None
    (kind, raw), = value
    if kind == "bool_value":
        return {"bool": raw == "true"}
    if kind in ("int64_value", "uint64_value"):
        return {kind[:-6]: int(raw)}
    if kind == "double_value" and re.fullmatch(r"-?[0-9.eE+-]+", raw):
        return {"double": float(raw)}
    if kind == "string_value":
        return {"string": unquote(raw)}
    if kind == "null_value":
        return {"null": True}
    return None


def main(checkout):
    rev = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(json.dumps({"source": "github.com/google/cel-spec tests/simple/testdata", "commit": rev}))
    for name, sections in SECTIONS.items():
        text = open(f"{checkout}/tests/simple/testdata/{name}.textproto").read()
        tokens = [t for t in TOKEN.findall(text) if t.strip() and not t.startswith("#")]
        top, _ = parse(tokens)
        for key, section in top:
            if key != "section" or field(section, "name").strip('"') not in sections:
                continue
            for k, test in section:
                if k != "test" or field(test, "bindings") or field(test, "container") or field(test, "type_env"):
                    continue
                expr, want = unquote(field(test, "expr")), expected(test)
                if want is None or SKIP.search(expr):
                    continue
                case = f"{name}/{field(section, 'name').strip(chr(34))}/{field(test, 'name').strip(chr(34))}"
                print(json.dumps({"case": case, "expr": expr, **want}, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
