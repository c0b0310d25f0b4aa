#!/usr/bin/env python3
"""Do two runs of the same profile agree as honest intervals should? (issue 14)

usage: compare_runs.py RUN1 RUN2 [--metrics=M1,M2] [--step-metrics=M1,M2] [--same-state]
       compare_runs.py --before-after BEFORE AFTER [--step-metrics=M1,M2]

RUN1, RUN2, BEFORE, AFTER: a results folder of one device, results/<device>/
(the technique CSVs of bench:all, columns in results/README.md and
lib/report/results.h), or a results root holding exactly one device folder.

Agreement (the default mode). A compared row is a non-baseline row with a
speedup and its interval (speedup, speedup_ci_low, speedup_ci_high) and a
timing verdict faster / slower / within noise. Rows of the two runs are
matched by (technique, setting, param_name, param_value, metric, workload). For each
matched row, with se = (log hi - log lo) / (2 * 1.96) from each run's 95%
interval,
    z = |log s1 - log s2| / sqrt(se1^2 + se2^2);
two honest intervals of the same quantity give z > 1.96 for about 5% of
rows. The script prints one line per row (technique, setting, s1 [lo, hi],
s2 [lo, hi], z; `*` marks z > 1.96), the rows found in one run only, each
run's machine probe before each technique (machine_probe.csv), how many
disagreeing and agreeing rows had a baseline whose median moved between the
runs (intervals that do not overlap: the machine ran at another speed), how
many rows were measured in another machine state in each run (their
xcore_ns, the core-to-core round trip, 3x apart or more) and the agreement
over the rows measured in the same state (a line of its own; the verdict
below stays over all rows), the
median speedup-interval half-width (max(hi / s - 1, 1 - lo / s)) and median
noise floor of each run, over all matched rows and over the step and loader
rows (metric `step time` or `epoch time`, or --step-metrics), and last
    agree: K of N rows within 1.96 (X%): PASS|FAIL (at most 10% may exceed)
--metrics restricts the check to rows of those metrics; --same-state to the
rows measured in the same machine state in both runs (xcore_ns within 3x;
rows without it are left out), for a machine whose host moves its CPUs.
Exit status: 0 PASS, 1 FAIL, 2 bad input (the message says what).

--before-after: per technique with step or loader rows, the number of
compared rows, their median noise floor and median half-width in BEFORE and
in AFTER, side by side as a Markdown table, then the medians over all those
rows against issue 14's targets (<= 2% each), and the rows above +-10%
(with the paired schema's stopped_by and busy columns: how many of them
the run flags as stopped by the budget or measured on a busy machine).
Exit 0, or 2 on bad input.

Python 3, standard library only. Test: bazel test //tools:compare_runs_test.
"""
import csv
import glob
import math
import os
import statistics
import sys

Z95 = 1.96
MAX_SHARE_ABOVE = 0.10
STEP_METRICS = ("step time", "epoch time", "evaluation time")
XCORE_STATES = 3.0
VERDICTS = ("faster", "slower", "within noise")
NEEDED = ("technique", "setting", "is_baseline", "param_name", "param_value", "metric",
          "noise_floor", "speedup", "speedup_ci_low", "speedup_ci_high", "timing_verdict")


class BadInput(Exception):
    pass


def device_folder(path):
    """The folder holding the CSVs: path itself, or its one device subfolder."""
    if not os.path.isdir(path):
        raise BadInput("%s: not a folder" % path)
    if glob.glob(os.path.join(path, "*.csv")):
        return path
    subs = sorted(d for d in glob.glob(os.path.join(path, "*"))
                  if os.path.isdir(d) and glob.glob(os.path.join(d, "*.csv")))
    if len(subs) == 1:
        return subs[0]
    if not subs:
        raise BadInput("%s: no CSV files in it or in a device folder below it" % path)
    raise BadInput("%s holds several device folders (%s): name one" %
                   (path, ", ".join(os.path.basename(s) for s in subs)))


def number(text, where, column):
    if text == "":
        return None
    try:
        v = float(text)
    except ValueError:
        raise BadInput("%s: %s is not a number: %r" % (where, column, text))
    if not math.isfinite(v):
        raise BadInput("%s: %s is not finite: %r" % (where, column, text))
    return v


def compared_row(row, where):
    """(key, record) for a compared row, None for any other row."""
    if row["is_baseline"] != "0" or row["timing_verdict"] not in VERDICTS:
        return None
    s = number(row["speedup"], where, "speedup")
    lo = number(row["speedup_ci_low"], where, "speedup_ci_low")
    hi = number(row["speedup_ci_high"], where, "speedup_ci_high")
    if s is None or lo is None or hi is None:
        return None
    if not (0 < lo <= s <= hi):
        raise BadInput("%s: speedup %g outside its interval [%g, %g] (or not positive)" %
                       (where, s, lo, hi))
    # the workload (schema 3) tells apart a technique's rows on its models;
    # a run before it has none (empty: matches an empty workload only)
    setting = row["setting"]
    # the waterfall's leave-one-out rows were "all on but X" before they
    # were "all on except 'X'": the same configuration
    if row["technique"] == "waterfall" and setting.startswith("all on but "):
        setting = "all on except '%s'" % setting[len("all on but "):]
    # and time to accuracy's "all techniques" is "all step techniques"
    if row["technique"] == "time_to_accuracy" and setting == "all techniques":
        setting = "all step techniques"
    key = (row["technique"], setting, row["param_name"], row["param_value"], row["metric"],
           row.get("workload") or "")
    # measured on a busy machine (other processes' CPU time, or the machine
    # state moved during its rounds: results/README.md)
    busy = row.get("busy") in ("1", "true")
    rec = {"s": s, "lo": lo, "hi": hi, "metric": row["metric"],
           "noise": number(row["noise_floor"], where, "noise_floor"),
           "se": (math.log(hi) - math.log(lo)) / (2 * Z95),
           "half_width": max(hi / s - 1, 1 - lo / s),
           # flags of the paired schema (results/README.md, columns 34 and 36);
           # None when the run predates them
           "flagged": (row["stopped_by"] == "budget" or busy)
           if "stopped_by" in row and "busy" in row else None,
           "busy": busy,
           # the core-to-core round trip the rounds ran at (schema 4); None before it
           "xcore": number(row["xcore_ns"], where, "xcore_ns") if row.get("xcore_ns") else None}
    return key, rec


def baseline_row(row, where):
    """(median, ci_low, ci_high) of a timed baseline row, None for any other row."""
    if row["is_baseline"] != "1":
        return None
    vals = [number(row[c], where, c) for c in ("median", "ci_low", "ci_high")]
    return tuple(vals) if None not in vals else None


def attach_baselines(rows, bases):
    """Each compared row's baseline as rec["base"]: the baseline row of its technique,
    metric and workload with the same parameter (an op sweep's size), else the only
    baseline of its technique, metric and workload; None when neither is found."""
    by_group = {}
    for (t, metric, wl, pname, pval), b in bases.items():
        by_group.setdefault((t, metric, wl), []).append(b)
    for (t, _setting, pname, pval, metric, wl), rec in rows.items():
        b = bases.get((t, metric, wl, pname, pval))
        group = by_group.get((t, metric, wl), [])
        rec["base"] = b if b else group[0] if len(group) == 1 else None


def read_run(path):
    """{key: record} of the compared rows of every technique CSV in the run."""
    folder = device_folder(path)
    rows, bases = {}, {}
    for name in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        if os.path.basename(name) == "machine_probe.csv":
            continue  # bench:all's machine state, read by read_probes
        with open(name, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            if "technique" not in header:
                continue  # not a technique CSV
            missing = [c for c in NEEDED if c not in header]
            if missing:
                raise BadInput("%s: missing columns %s" % (name, ", ".join(missing)))
            for i, row in enumerate(reader, start=2):
                where = "%s line %d" % (name, i)
                base = baseline_row(row, where)
                if base:
                    bases[(row["technique"], row["metric"], row.get("workload") or "",
                           row["param_name"], row["param_value"])] = base
                got = compared_row(row, where)
                if got is None:
                    continue
                key, rec = got
                if key in rows:
                    raise BadInput("%s: a second row for %s (rows must be unique to be matched)" %
                                   (where, label(key)))
                rows[key] = rec
    if not rows:
        raise BadInput("%s: no compared rows (non-baseline rows with a speedup interval)" % folder)
    attach_baselines(rows, bases)
    return rows


def label(key):
    technique, setting, pname, pval, metric, workload = key
    s = "%s %s" % (technique, setting)
    if pname or pval:
        s += " %s=%s" % (pname, pval)
    return s + " (%s%s)" % (metric, ", " + workload if workload else "")


def z_score(a, b):
    d = abs(math.log(a["s"]) - math.log(b["s"]))
    se = math.sqrt(a["se"] ** 2 + b["se"] ** 2)
    if se == 0:
        return 0.0 if d == 0 else math.inf
    return d / se


def median_of(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def pct(v):
    return "-" if v is None else "%.2f%%" % (100 * v)


def interval(r):
    return "%.4f [%.4f, %.4f]" % (r["s"], r["lo"], r["hi"])


def print_spread(title, keys, run1, run2):
    print("%s (%d rows): median half-width %s vs %s, median noise floor %s vs %s" % (
        title, len(keys),
        pct(median_of(run1[k]["half_width"] for k in keys)),
        pct(median_of(run2[k]["half_width"] for k in keys)),
        pct(median_of(run1[k]["noise"] for k in keys)),
        pct(median_of(run2[k]["noise"] for k in keys))))


def read_probes(path):
    """machine_probe.csv of a run (results/README.md) by technique; {} if absent."""
    f = os.path.join(device_folder(path), "machine_probe.csv")
    if not os.path.exists(f):
        return {}
    with open(f, newline="") as fh:
        return {r["technique"]: r for r in csv.DictReader(fh) if r.get("technique")}


def print_probes(path1, path2, keys, run1, run2):
    """Per technique: rows that disagree, and each run's machine probe before it
    (compute and copy pair ratios, one CPU's compute time, the cache walk's ns a
    load where the run has it), where both runs have one."""
    p1, p2 = read_probes(path1), read_probes(path2)
    if not p1 or not p2:
        return
    techs = sorted({k[0] for k in keys})
    print("machine before each technique (two CPUs together / alone: compute, copy; "
          "compute alone in ms; cache walk ns a load; core-to-core round trip ns), "
          "run 1 | run 2:")
    for t in techs:
        rows = [k for k in keys if k[0] == t]
        bad = sum(z_score(run1[k], run2[k]) > Z95 for k in rows)
        cell = []
        for p in (p1.get(t), p2.get(t)):
            vals = [p["fma_pair_ratio"], p["copy_pair_ratio"], p["fma_alone_ms"]] if p else []
            if p and p.get("cache_load_ns"):  # runs before the cache walk have no column
                vals.append(p["cache_load_ns"])
            if p and p.get("xcore_ns"):  # nor before the core-to-core round trip
                vals.append(p["xcore_ns"])
            cell.append(" ".join(vals) if p else "-")
        print("  %-26s %3d of %3d disagree   %-30s | %s" % (t, bad, len(rows), cell[0], cell[1]))


def base_moved(a, b):
    """Whether a row's baseline ran at another speed in the other run: the two
    baselines' median intervals do not overlap. None when either has none."""
    if not a.get("base") or not b.get("base"):
        return None
    (_, lo1, hi1), (_, lo2, hi2) = a["base"], b["base"]
    return hi1 < lo2 or hi2 < lo1


def print_moved(keys, run1, run2):
    """How many disagreeing and agreeing rows had a baseline that moved between
    the runs: a ratio measured while the machine ran at another speed may differ
    by more than either run's interval (its state is not in the interval)."""
    counts = {True: [0, 0], False: [0, 0]}  # disagrees: [moved, with a baseline]
    for k in keys:
        m = base_moved(run1[k], run2[k])
        if m is None:
            continue
        c = counts[z_score(run1[k], run2[k]) > Z95]
        c[0] += m
        c[1] += 1
    if counts[True][1] + counts[False][1] == 0:
        return
    print("baseline moved between the runs (its median's intervals do not overlap: the "
          "machine ran at another speed): %d of %d disagreeing rows, %d of %d agreeing rows"
          % (counts[True][0], counts[True][1], counts[False][0], counts[False][1]))


def other_state(a, b):
    """Whether a row was measured in another machine state in each run: its
    core-to-core round trips (xcore_ns) differ by XCORE_STATES times or more
    (the EPYC VM's two states: 55-80 and 315-570 ns). None when either run has
    no round trip for it."""
    x1, x2 = a.get("xcore"), b.get("xcore")
    if not x1 or not x2:
        return None
    return max(x1, x2) >= XCORE_STATES * min(x1, x2)


def print_states(keys, run1, run2):
    """Agreement over the rows measured in the same machine state in both runs,
    and how many rows were not (two runs of one profile on two different
    machines, in effect: their ratios need not agree)."""
    known = [k for k in keys if other_state(run1[k], run2[k]) is not None]
    if not known:
        return
    same = [k for k in known if not other_state(run1[k], run2[k])]
    other = [k for k in known if other_state(run1[k], run2[k])]
    bad_other = sum(z_score(run1[k], run2[k]) > Z95 for k in other)
    print("machine state (xcore_ns, the core-to-core round trip of each row's rounds; %gx "
          "apart is another state): %d of %d rows measured in another state in each run, %d of "
          "them disagreeing" % (XCORE_STATES, len(other), len(known), bad_other))

    def agreeing(rows):
        """Of rows (not empty): how many agree within Z95, how many, the share."""
        good = len(rows) - sum(z_score(run1[k], run2[k]) > Z95 for k in rows)
        return good, len(rows), Z95, 100.0 * good / len(rows)

    if same:
        print("agree within one state: %d of %d rows measured in the same state within %.2f "
              "(%.1f%%)" % agreeing(same))
        # a row flagged busy saw other processes, or the state move during
        # its rounds (its median round trip may still look like one state)
        quiet = [k for k in same if not run1[k]["busy"] and not run2[k]["busy"]]
        if quiet and len(quiet) < len(same):
            print("  of them flagged busy in neither run: %d of %d within %.2f (%.1f%%)" %
                  agreeing(quiet))


def agreement(path1, path2, metrics, step_metrics, same_state=False):
    run1, run2 = read_run(path1), read_run(path2)
    if metrics:
        run1 = {k: v for k, v in run1.items() if v["metric"] in metrics}
        run2 = {k: v for k, v in run2.items() if v["metric"] in metrics}
    keys = sorted(set(run1) & set(run2))
    if not keys:
        raise BadInput("no compared row is in both runs (%d and %d compared rows)" %
                       (len(run1), len(run2)))
    if same_state:
        kept = [k for k in keys if other_state(run1[k], run2[k]) is False]
        print("--same-state: %d of %d matched rows were measured in the same machine state in "
              "both runs (xcore_ns within %gx); the check is over them alone" %
              (len(kept), len(keys), XCORE_STATES))
        if not kept:
            raise BadInput("--same-state: no row was measured in the same machine state in "
                           "both runs (or the runs predate xcore_ns)")
        keys = kept
    print("%-52s %-28s %-28s %7s" % ("row", "run 1", "run 2", "z"))
    above = 0
    for k in keys:
        z = z_score(run1[k], run2[k])
        above += z > Z95
        print("%-52s %-28s %-28s %7.2f%s" % (label(k), interval(run1[k]), interval(run2[k]), z,
                                             " *" if z > Z95 else ""))
    for name, only in (("run 1", set(run1) - set(run2)), ("run 2", set(run2) - set(run1))):
        for k in sorted(only):
            print("only in %s (not counted): %s" % (name, label(k)))
    n = len(keys)
    print("rows with z > %.2f: %d of %d (%.1f%%)" % (Z95, above, n, 100.0 * above / n))
    print_probes(path1, path2, keys, run1, run2)
    print_moved(keys, run1, run2)
    print_states(keys, run1, run2)
    print_spread("all matched rows", keys, run1, run2)
    step = [k for k in keys if run1[k]["metric"] in step_metrics]
    print_spread("step and loader rows", step, run1, run2)
    ok = above <= MAX_SHARE_ABOVE * n
    print("agree: %d of %d rows within %.2f (%.1f%%): %s (at most %d%% may exceed)" % (
        n - above, n, Z95, 100.0 * (n - above) / n, "PASS" if ok else "FAIL",
        round(100 * MAX_SHARE_ABOVE)))
    return 0 if ok else 1


def by_technique(run, step_metrics):
    out = {}
    for k, r in run.items():
        if r["metric"] in step_metrics:
            out.setdefault(k[0], []).append(r)
    return out


def before_after(path1, path2, step_metrics):
    before = by_technique(read_run(path1), step_metrics)
    after = by_technique(read_run(path2), step_metrics)
    if not before and not after:
        raise BadInput("no compared rows with metric %s in either run" % " or ".join(step_metrics))
    print("| technique | rows before | noise floor before | half-width before "
          "| rows after | noise floor after | half-width after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")

    def cells(rows):
        if not rows:
            return "0 | - | -"
        return "%d | %s | %s" % (len(rows), pct(median_of(r["noise"] for r in rows)),
                                 pct(median_of(r["half_width"] for r in rows)))

    for t in sorted(set(before) | set(after)):
        print("| %s | %s | %s |" % (t, cells(before.get(t, [])), cells(after.get(t, []))))
    all_b = [r for rows in before.values() for r in rows]
    all_a = [r for rows in after.values() for r in rows]
    print("| **all step and loader rows** | %s | %s |" % (cells(all_b), cells(all_a)))
    print()
    for name, rows in (("before", all_b), ("after", all_a)):
        hw = median_of(r["half_width"] for r in rows)
        nf = median_of(r["noise"] for r in rows)
        print("%s: median half-width %s (target <= 2%%: %s), median noise floor %s "
              "(target <= 2%%: %s), rows above +-10%%: %d of %d%s" % (
                  name, pct(hw), verdict(hw), pct(nf), verdict(nf),
                  sum(r["half_width"] > 0.10 for r in rows), len(rows), wide_flags(rows)))
    return 0


def wide_flags(rows):
    """How many rows wider than +-10% (interval or noise floor) the run flags."""
    wide = [r for r in rows if r["half_width"] > 0.10 or (r["noise"] or 0) > 0.10]
    if not wide or any(r["flagged"] is None for r in wide):
        return ""
    flagged = sum(bool(r["flagged"]) for r in wide)
    return " (interval or noise floor above +-10%%: %d rows, %d of them flagged budget or busy, " \
           "%d unflagged)" % (len(wide), flagged, len(wide) - flagged)


def verdict(v):
    if v is None:
        return "not measured"
    return "met" if v <= 0.02 else "not met"


def parse_list(arg):
    return tuple(m.strip() for m in arg.split("=", 1)[1].split(",") if m.strip())


def main(argv):
    paths, mode, metrics, step_metrics, same_state = [], "agree", None, STEP_METRICS, False
    for a in argv:
        if a == "--before-after":
            mode = "before-after"
        elif a == "--same-state":
            same_state = True
        elif a.startswith("--metrics="):
            metrics = parse_list(a)
        elif a.startswith("--step-metrics="):
            step_metrics = parse_list(a)
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("--"):
            raise BadInput("unknown flag %s (see --help)" % a)
        else:
            paths.append(a)
    if len(paths) != 2:
        raise BadInput("two results folders expected, got %d (see --help)" % len(paths))
    if mode == "before-after":
        return before_after(paths[0], paths[1], step_metrics)
    return agreement(paths[0], paths[1], metrics, step_metrics, same_state)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print("compare_runs: %s" % e, file=sys.stderr)
        sys.exit(2)
    except OSError as e:
        print("compare_runs: %s" % e, file=sys.stderr)
        sys.exit(2)
