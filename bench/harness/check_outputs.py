#!/usr/bin/env python3
"""Checks what a technique binary wrote: shape, not timings.

usage: check_outputs.py OUT_DIR TECHNIQUE GOLDEN_CSV [--min-rows=N] [--plots=a,b]
                        [--no-gbench]  (a technique that times without Google Benchmark)
                        [--rounds]  (every timed row comes from rounds: rounds >= 5,
                                     reps == rounds, a stopped_by value)
                        [--na-note=TEXT]  (n/a rows expected, each note saying TEXT)
       check_outputs.py OUT_DIR --describe=FILE GOLDEN_CSV
                        (all of the above from a technique binary's --describe line)

- results/<device>/<technique>.csv exists, its header is the frozen schema
  (first line of the golden CSV), every row has every column;
- numbers parse; timed rows have at least 5 repetitions and a median inside
  [min, max]; speedup rows carry an interval around the point estimate;
- a row with rounds (bench/harness/rounds.h) has at least 5, stopped_by
  target, budget or cap, and a minimum detectable effect; with --rounds
  every timed row must have them, and its reps are its rounds;
- with workloads (the step harness's, from --describe): every row names one
  of them in its workload column, each has rows, all the same number (every
  setting on every workload), synthetic data is named so, and a timed row
  carries its throughput, model FLOP rate and MFU (issue 15);
- no correctness verdict is DIFFERS; every n/a row says why in note
  (with --na-note: there are n/a rows, and each note contains TEXT);
- <technique>.json, <technique>.gbench.json and fingerprint.json parse;
- the plots exist as PNG (signature), SVG and PDF.
Timing verdicts are never checked: they depend on the machine.
"""
import csv
import glob
import json
import math
import os
import re
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def num(s):
    return float(s) if s != "" else math.nan


def check_rounds(where, r, want):
    """The rounds columns of one row (absent before schema 2)."""
    timed = r["median"] != ""
    if "rounds" not in r:
        if want:
            fail(where + ": no rounds column")
        return
    if r["rounds"] == "":
        if want and timed:
            fail(where + ": a timed row without rounds")
        return
    rounds = int(r["rounds"])
    if rounds < 5:
        fail(where + ": %d rounds, want at least 5" % rounds)
    if r["stopped_by"] not in ("target", "budget", "cap"):
        fail(where + ": stopped_by %r, want target, budget or cap" % r["stopped_by"])
    if not (num(r["mde"]) > 0):
        fail(where + ": minimum detectable effect %r" % r["mde"])
    if want and timed and int(r["reps"]) != rounds:
        fail(where + ": reps %s, rounds %d" % (r["reps"], rounds))


def check_witness(where, note):
    """A first-update witness widened by its rounding control (step_harness.c,
    witness_controls): twice the farthest draw, and its draws stop early only
    once that reached the distance D (the verdict all six would give)."""
    m = re.search(r"first update: per-tensor norms ([-0-9.e+]+) apart, tolerance ([-0-9.e+]+) "
                  r"\(from nudged weights its own moved ([-0-9.e+]+), the farthest of (\d+) "
                  r"draws?\)", note)
    if not m:
        if "from nudged weights its own moved" in note:
            fail(where + ": a witness's rounding control without its draws: " + note)
        return
    dist, tol, moved, draws = (num(m.group(1)), num(m.group(2)), num(m.group(3)),
                               int(m.group(4)))
    if not 1 <= draws <= 6:  # TB_WITNESS_CONTROL_RUNS
        fail(where + ": %d draws of the witness's rounding control" % draws)
    if abs(tol - 2 * moved) > 0.051 * tol:  # 2 significant digits each
        fail(where + ": witness tolerance %g is not twice its control's %g" % (tol, moved))
    if draws < 6 and dist > tol * 1.05:
        fail(where + ": the witness's draws stopped at %d with D %g past its tolerance %g"
             % (draws, dist, tol))


def check_tta(res_dir):
    """bench:waterfall's time_to_accuracy.csv, where it wrote one: a timed
    row compared with the baseline from 5 seeds or more has the paired
    columns (rounds = seeds, its speedup inside its interval, stopped_by
    cap); with fewer seeds no speedup, and its note gives the ratio."""
    path = os.path.join(res_dir, "time_to_accuracy.csv")
    if not os.path.exists(path):
        return
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    base = [r for r in rows if r["is_baseline"] == "1"]
    for r in rows:
        where = "time_to_accuracy %s" % r["setting"]
        if r["median"] == "" or r["is_baseline"] == "1":
            continue
        reps = int(r["reps"])
        if reps >= 5 and base and base[0]["median"] != "":
            if r["speedup"] == "" or r["rounds"] != str(reps) or r["stopped_by"] != "cap":
                fail(where + ": %d seeds but no paired speedup (rounds %r, stopped_by %r)"
                     % (reps, r["rounds"], r["stopped_by"]))
            s, a, b = num(r["speedup"]), num(r["speedup_ci_low"]), num(r["speedup_ci_high"])
            if not (0 < a <= s <= b):
                fail(where + ": speedup %g outside [%g, %g]" % (s, a, b))
            if r["timing_verdict"] not in ("faster", "slower", "within noise"):
                fail(where + ": verdict %r" % r["timing_verdict"])
        elif r["speedup"] != "" or r["timing_verdict"] != "n/a":
            fail(where + ": %d seed(s) yet a speedup or verdict" % reps)
    print("ok: %s, %d rows" % (path, len(rows)))


ALIAS = re.compile(r"the same configuration as '(.*?)' on this workload: one check and one "
                   r"timing, given in both rows")
ALIAS_SAME = ("median", "ci_low", "ci_high", "min", "max", "speedup", "speedup_ci_low",
              "speedup_ci_high", "timing_verdict", "correctness", "memory_bytes", "rounds")


def check_aliases(tech, body):
    """A row that repeats an earlier setting's configuration on its workload
    (step_harness.c, same_as) gives that setting's check and timing: the
    same numbers, never a second draw. The waterfall's "all on" is always
    its workload's last stage."""
    for r in body:
        m = ALIAS.search(r["note"])
        if not m:
            continue
        twin = [t for t in body if t["workload"] == r["workload"] and t["setting"] == m.group(1)]
        if len(twin) != 1:
            fail("%s %s: the same configuration as %r, which is not one row"
                 % (r["workload"], r["setting"], m.group(1)))
        for k in ALIAS_SAME:
            if r[k] != twin[0][k]:
                fail("%s %s: %s %r, but %r, the same configuration, has %r"
                     % (r["workload"], r["setting"], k, r[k], m.group(1), twin[0][k]))
    if tech == "waterfall":
        for r in body:
            if r["setting"] == "all on" and r["median"] and not ALIAS.search(r["note"]):
                fail("%s: all on is timed on its own, not as its last stage" % r["workload"])


def check_workloads(body, workloads):
    """The workload rows' shape: each named model has rows, as many as the others."""
    count = {w: 0 for w in workloads}
    for r in body:
        model = r["workload"].split("-")[0]
        if model not in count:
            fail("row %s: workload %r is none of %r" % (r["setting"], r["workload"], workloads))
        if model in ("resnet50", "gpt2") and not r["workload"].endswith("-synthetic"):
            fail("row %s: workload %r does not say its data is synthetic"
                 % (r["setting"], r["workload"]))
        count[model] += 1
        if r["median"] != "":
            unit = {"resnet50": "images/s", "gpt2": "tokens/s"}.get(model, "samples/s")
            if r["rate_unit"] != unit or not (num(r["rate"]) > 0):
                fail("row %s on %s: rate %r %r, want %s" % (r["setting"], r["workload"],
                                                             r["rate"], r["rate_unit"], unit))
            if not (num(r["model_gflops"]) > 0):
                fail("row %s on %s: no model FLOP rate" % (r["setting"], r["workload"]))
            if r["gemm_ceiling"] != "" and not (0 < num(r["mfu"])):
                fail("row %s on %s: a GEMM ceiling without an MFU" % (r["setting"],
                                                                      r["workload"]))
    if len(set(count.values())) != 1 or 0 in count.values():
        fail("rows per workload %r: want rows on each, as many on every one" % count)


def main():
    args = sys.argv[1:]
    out, tech, golden = args[0], args[1], args[2]
    min_rows, plots, gbench, na_note, want_rounds, headline = 1, [tech], True, None, False, None
    workloads = None
    if tech.startswith("--describe="):
        with open(tech.partition("=")[2]) as f:
            desc = json.load(f)
        tiny = desc["tiny"]
        tech, min_rows, gbench, na_note = (desc["results"], tiny["min_rows"], tiny["gbench"],
                                           tiny["na_note"])
        plots = [p for p in tiny["plots"].split(",") if p]
        headline = desc.get("headline")
        if tiny.get("workloads"):
            workloads = tiny["workloads"].split(",")
    for a in args[3:]:
        key, _, value = a.partition("=")
        if key == "--min-rows":
            min_rows = int(value)
        elif key == "--plots":
            plots = [p for p in value.split(",") if p]
        elif key == "--no-gbench":
            gbench = False
        elif key == "--na-note":
            na_note = value
        elif key == "--rounds":
            want_rounds = True
        else:
            fail("unknown argument " + a)
    with open(golden, newline="") as f:
        schema = next(csv.reader(f))
    dirs = glob.glob(os.path.join(out, "results", "*", tech + ".csv"))
    if len(dirs) != 1:
        fail("expected one results/<device>/%s.csv under %s, found %r" % (tech, out, dirs))
    csv_path = dirs[0]
    res_dir = os.path.dirname(csv_path)
    slug = os.path.basename(res_dir)
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    if rows[0] != schema:
        fail("header differs from the schema:\n%r\n%r" % (rows[0], schema))
    body = [dict(zip(schema, r)) for r in rows[1:]]
    for n, r in enumerate(rows[1:], 2):
        if len(r) != len(schema):
            fail("line %d has %d fields, want %d" % (n, len(r), len(schema)))
    if len(body) < min_rows:
        fail("%d rows, want at least %d" % (len(body), min_rows))
    for n, r in enumerate(body, 2):
        where = "line %d (%s %s %s)" % (n, r["setting"], r["param_value"], r["metric"])
        if r["technique"] != tech:
            fail(where + ": technique " + r["technique"])
        if r["correctness"] == "DIFFERS":
            fail(where + ": correctness DIFFERS: " + r["note"])
        if r["correctness"] not in ("exact", "within tolerance", "n/a"):
            fail(where + ": unknown correctness " + r["correctness"])
        if r["correctness"] == "within tolerance" and r["tolerance"] == "":
            fail(where + ": within tolerance without the tolerance")
        if r["timing_verdict"] not in ("faster", "slower", "within noise", "baseline", "n/a"):
            fail(where + ": unknown timing verdict " + r["timing_verdict"])
        if r["timing_verdict"] == "n/a" and r["median"] == "" and not r["note"]:
            fail(where + ": n/a row without a reason in note")
        if r["median"] != "":
            reps, med, lo, hi = int(r["reps"]), num(r["median"]), num(r["min"]), num(r["max"])
            if reps < 5:
                fail(where + ": %d repetitions" % reps)
            if not (lo <= med <= hi) or med <= 0:
                fail(where + ": median %g outside [%g, %g]" % (med, lo, hi))
        check_rounds(where, r, want_rounds)
        check_witness(where, r["note"])
        if r["speedup"] != "":
            s, a, b = num(r["speedup"]), num(r["speedup_ci_low"]), num(r["speedup_ci_high"])
            if not (a <= s <= b) or s <= 0:
                fail(where + ": speedup %g outside its interval [%g, %g]" % (s, a, b))
    check_aliases(tech, body)
    if workloads:
        check_workloads(body, workloads)
    if na_note is not None:
        na_rows = [r for r in body if r["timing_verdict"] == "n/a" and r["median"] == ""]
        if not na_rows:
            fail("no n/a row, want rows saying %r" % na_note)
        for r in na_rows:
            if na_note not in r["note"]:
                fail("n/a row %s: note %r does not say %r" % (r["setting"], r["note"], na_note))
    gbench_names = [tech + ".gbench.json"]
    if workloads and len(workloads) > 1:  # one per workload
        gbench_names = sorted({"%s.%s.gbench.json" % (tech, r["workload"]) for r in body
                               if r["rounds"] != ""})
    names = [tech + ".json", "fingerprint.json"] + (gbench_names if gbench else [])
    for name in names:
        p = os.path.join(res_dir, name)
        if not os.path.exists(p):
            fail("missing " + p)
        with open(p) as f:
            text = f.read()
        try:
            json.loads(text)
        except ValueError as e:
            if name.endswith("gbench.json") and ("NaN" in text or "Infinity" in text):
                continue  # Google Benchmark writes bare NaN for empty counters
            fail("%s is not JSON: %s" % (p, e))
    # The headline the report's summary shows must name one of its settings,
    # and the JSON sidecar carries it to the report.
    if headline:
        settings = {dict(zip(schema, r))["setting"] for r in rows[1:]}
        if headline not in settings:
            fail("headline %r is none of the settings %r" % (headline, sorted(settings)))
        with open(os.path.join(res_dir, tech + ".json")) as f:
            if json.load(f).get("headline") != headline:
                fail("%s.json does not carry the headline %r" % (tech, headline))
    plot_dir = os.path.join(out, "plots", slug)
    for p in plots:
        base = os.path.join(plot_dir, p)
        with open(base + ".png", "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                fail(base + ".png is not a PNG")
        if os.path.getsize(base + ".png") < 2000:
            fail(base + ".png is suspiciously small")
        with open(base + ".svg") as f:
            if "<svg" not in f.read(4096):
                fail(base + ".svg is not SVG")
        with open(base + ".pdf", "rb") as f:
            if f.read(5) != b"%PDF-":
                fail(base + ".pdf is not a PDF")
        if not os.path.exists(base + ".gp"):
            fail(base + ".gp (the gnuplot script) is missing")
    # With several workloads the technique's speedup figure draws each of
    # them: a series titled "<model>: <param>" per workload with timed rows.
    if workloads and len(workloads) > 1 and tech in plots:
        with open(os.path.join(plot_dir, tech + ".gp")) as f:
            gp = f.read()
        timed = {r["workload"].split("-")[0] for r in body if r["speedup"] != ""}
        for model in sorted(timed):
            if "'%s: " % model not in gp and '"%s: ' % model not in gp:
                fail("%s.gp draws no series of workload %s (its rows have speedups)"
                     % (tech, model))
    check_tta(res_dir)
    left = glob.glob(os.path.join(res_dir, "*.tmp*")) + glob.glob(os.path.join(plot_dir, "*.tmp*"))
    if left:
        fail("temporary files left behind: %r" % left)
    print("ok: %s, %d rows, plots %s" % (csv_path, len(body), ",".join(plots)))


main()
