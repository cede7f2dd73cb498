#!/usr/bin/env python3
"""Validate wslock's JSON output against doc/schema/ (draft 2020-12).

  validate.py SCHEMA_DIR NAME one   < JSON      one document
  validate.py SCHEMA_DIR NAME lines < JSONL     every line (JSON Lines)
  validate.py SCHEMA_DIR - collected DIR        every document that
      tests/schema/collect-wslock kept in DIR, against the schema its
      command prints (an error document against error.schema.json);
      prints "SCHEMA N" per schema, then the failures.

Every *.schema.json in SCHEMA_DIR is checked against the meta-schema and
registered under its $id, so that the cross-file $refs ("owner.schema.json",
"owner.schema.json#/$defs/...") resolve without any network access: with
the referencing library (jsonschema >= 4.18) or a RefResolver store (older,
as Debian 12's python3-jsonschema 4.10).
"""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore", DeprecationWarning)
import jsonschema  # noqa: E402
from jsonschema import Draft202012Validator as V  # noqa: E402
from jsonschema.exceptions import best_match  # noqa: E402


def load(sdir):
    schemas = {}
    for f in sorted(os.listdir(sdir)):
        if f.endswith(".schema.json"):
            with open(os.path.join(sdir, f)) as fh:
                s = json.load(fh)
            V.check_schema(s)
            schemas[f] = s
    return schemas


def validator(schemas, name):
    root = schemas[name]
    try:
        from referencing import Registry, Resource
        reg = Registry().with_resources(
            (s["$id"], Resource.from_contents(s)) for s in schemas.values())
        return V(root, registry=reg)
    except ImportError:
        store = {s["$id"]: s for s in schemas.values()}
        return V(root, resolver=jsonschema.RefResolver.from_schema(root, store=store))


def problem(v, inst):
    errs = list(v.iter_errors(inst))
    if not errs:
        return None
    e = best_match(errs)
    return "at /%s: %s" % ("/".join(map(str, e.absolute_path)), e.message[:400])


SUBCOMMANDS = ("acquire", "release", "run", "inspect", "recover", "reclaim")


def schema_for(args, doc):
    """The schema a command's stdout document must match, or None (not JSON
    output: help, version, text format, a command's own output)."""
    opts = args[:args.index("--")] if "--" in args else args
    sub = next((a for a in opts if a in SUBCOMMANDS), None)
    if any(a in ("-h", "--help", "-V", "--version") for a in opts):
        return None
    if "text" in opts or "--format=text" in opts:
        return None
    if isinstance(doc, dict) and "error" in doc:
        return "error.schema.json"
    if sub is None:
        return None
    if sub == "recover" and "--" in args:
        return None  # stdout belongs to the command
    if sub == "inspect" and "--owner" in opts and not (
            isinstance(doc, dict) and "owners" in doc):
        return "owner.schema.json" if doc is not None else None
    return {"acquire": "acquire.schema.json", "release": "release.schema.json",
            "inspect": "inspect.schema.json", "recover": "recover.schema.json",
            "reclaim": "reclaim.schema.json"}.get(sub)


def collected(schemas, cdir):
    vs = {n: validator(schemas, n) for n in schemas}
    counts, bad = {}, []
    for f in sorted(os.listdir(cdir)):
        if not f.endswith(".out"):
            continue
        base = os.path.join(cdir, f[:-4])
        with open(base + ".out", "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
        try:
            with open(base + ".args", "rb") as fh:
                args = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0")[:-1]]
        except OSError:
            continue
        if not text.strip():
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            doc = ValueError
        if doc is ValueError:
            opts = args[:args.index("--")] if "--" in args else args
            if schema_for(opts, None) is None and any(a in SUBCOMMANDS for a in opts) \
                    and not ("text" in opts or any(a in ("-h", "--help", "-V", "--version") for a in opts)) \
                    and not ("recover" in opts and "--" in args):
                bad.append("not one JSON document: wslock %s\n  printed: %s"
                           % (" ".join(args), text[:500]))
            continue
        name = schema_for(args, doc)
        if name is None:
            continue
        counts[name] = counts.get(name, 0) + 1
        p = problem(vs[name], doc)
        if p:
            bad.append("%s: %s\n  wslock %s\n  printed: %s"
                       % (name, p, " ".join(args), text.strip()[:1500]))
    for n in sorted(schemas):
        print("%s %d" % (n, counts.get(n, 0)))
    seen = set()
    for b in bad:
        key = b.split("\n")[0]
        if key in seen:
            continue
        seen.add(key)
        print("INVALID " + b)
    return 1 if bad else 0


def main():
    sdir, name, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    schemas = load(sdir)
    if mode == "collected":
        return collected(schemas, sys.argv[4])
    v = validator(schemas, name)
    text = sys.stdin.read()
    docs = [l for l in text.splitlines() if l.strip()] if mode == "lines" else [text]
    if not docs or not text.strip():
        sys.exit("%s: no document to validate" % name)
    bad = 0
    for d in docs:
        p = problem(v, json.loads(d))
        if p:
            bad = 1
            print("%s: %s" % (name, p))
            print("  in: %s" % d[:2000])
    return bad


if __name__ == "__main__":
    sys.exit(main())
