"""Differential fuzzing of astjax: random NumPy programs, every transformation, oracles.

    python bench/fuzz.py --programs 2000 --seed 1 --out fuzz_failures/

Each program ``prog(x, y)`` is built from astjax's primitive registry and the Python
constructs astjax accepts (loops, branches, while, closures, containers, in-place
updates, lax calls, nested transformations) by ``tests/fuzzgen.py``, written to a
module file and checked: jit against eager NumPy, grad and jvp against float64
finite differences, vmap against a Python loop, jvp-of-grad and vmap-of-grad against
nested finite differences.  Failures are grouped by (check, kind, message); the first
program of each group is shrunk to a minimal reproducer written to ``--out``.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, ".."))

import fuzzgen  # noqa: E402


def campaign(programs, seed, out=None, avoid=(), checks=fuzzgen.CHECKS, shrink=True,
             time_limit=None, per_class=4):
    """Run ``programs`` random programs from ``seed``; returns the summary dict."""
    modules = fuzzgen.SourceModules("astjax_fuzz")
    counts = collections.Counter()
    first = {}
    by_class = collections.Counter()
    features = collections.Counter()
    t0 = time.time()
    ran = 0
    for k in range(programs):
        if time_limit and time.time() - t0 > time_limit:
            break
        prog = fuzzgen.Generator(seed * 1_000_003 + k, avoid=avoid).program()
        results = fuzzgen.check_program(prog, modules, checks)
        ran += 1
        if results is None:
            counts["invalid programs"] += 1
            continue
        features.update(prog.features)
        for check, r in results.items():
            counts["checks"] += 1
            if r is None:
                counts["passed"] += 1
            elif r == "inconclusive":
                counts["inconclusive (kink nearby)"] += 1
            else:
                counts[f"failed: {r.kind}"] += 1
                by_class[r.key] += 1
                first.setdefault(r.key, [])
                if len(first[r.key]) < per_class:
                    first[r.key].append(prog)
    summary = {"programs": ran, "seed": seed, "seconds": round(time.time() - t0, 1),
               "counts": dict(counts), "classes": {}}
    n = 0
    for key in sorted(first, key=lambda k: (-by_class[k], k)):
        failure = fuzzgen.Failure(*key)
        seen = {}
        for prog in first[key]:
            if shrink:
                prog = fuzzgen.shrink(prog, failure, modules)
            seen.setdefault(tuple(sorted(prog.features)), prog)
        for feats, prog in seen.items():
            entry = {"count": by_class[key], "program": prog, "features": list(feats)}
            if out:
                os.makedirs(out, exist_ok=True)
                name = f"{n:02d}_{key[0]}_{key[1]}.py"
                n += 1
                with open(os.path.join(out, name), "w", encoding="utf-8") as fh:
                    fh.write(fuzzgen.reproducer(prog, failure))
                entry["file"] = os.path.join(out, name)
            summary["classes"][key + feats] = entry
    return summary


def report(summary, log=print):
    c = summary["counts"]
    log(f"programs run: {summary['programs']} (seed {summary['seed']}, "
        f"{summary['seconds']} s); invalid skipped: {c.get('invalid programs', 0)}")
    log(f"checks: {c.get('checks', 0)}, passed {c.get('passed', 0)}, inconclusive "
        f"{c.get('inconclusive (kink nearby)', 0)}, failed "
        f"{sum(v for k, v in c.items() if k.startswith('failed'))}")
    if not summary["classes"]:
        log("no failures")
    for key, info in summary["classes"].items():
        log(f"  {info['count']:4d}  {key[0]:9s} {key[1]:8s} {key[2]}  "
            f"[{', '.join(info['features'])}]  {info.get('file', '')}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="fuzz_failures")
    ap.add_argument("--avoid-known", action="store_true",
                    help="skip constructs with known open bugs (fuzzgen.KNOWN_OPEN)")
    ap.add_argument("--checks", default=",".join(fuzzgen.CHECKS))
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds")
    args = ap.parse_args(argv)
    summary = campaign(args.programs, args.seed, args.out,
                       fuzzgen.KNOWN_OPEN if args.avoid_known else (),
                       tuple(args.checks.split(",")), not args.no_shrink, args.time_limit)
    report(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
