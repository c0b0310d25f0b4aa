#!/usr/bin/env python3
"""Tests tools/compare_runs.py on tiny hand-made results folders with known answers.

Run: bazel test //tools:compare_runs_test   (or: python3 tools/compare_runs_test.py)

Each row's interval is built symmetric in log space, lo = s exp(-1.96 se),
hi = s exp(+1.96 se), so the z of a pair of rows is known by hand:
|log s1 - log s2| / sqrt(se1^2 + se2^2).
"""
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "compare_runs.py")
HEADER = ("technique,backend,device,setting,is_baseline,param_name,param_value,metric,unit,"
          "reps,median,ci_low,ci_high,min,max,noise_floor,speedup,speedup_ci_low,"
          "speedup_ci_high,timing_verdict,correctness,checked_against,tolerance,max_rel_err,"
          "rate,rate_unit,ceiling_name,ceiling_rate,fraction_of_ceiling,memory_bytes,note")
COLS = HEADER.split(",")
failures = 0


def check(cond, what):
    global failures
    print("%s: %s" % ("ok" if cond else "FAIL", what))
    if not cond:
        failures += 1


def row(technique, setting, s=None, se=None, noise=None, metric="step time", baseline=False,
        verdict=None, pname="", pval="", median=10.0):
    """One CSV line; s and se give the speedup and its log-symmetric interval; a
    baseline's median gets an interval of +-2%."""
    v = dict.fromkeys(COLS, "")
    v.update(technique=technique, backend="cpu", device="Test CPU", setting=setting,
             is_baseline="1" if baseline else "0", param_name=pname, param_value=pval,
             metric=metric, unit="ms", reps="5", median="%.9g" % median, correctness="n/a")
    if baseline:
        v.update(speedup="1", timing_verdict="baseline", ci_low="%.9g" % (0.98 * median),
                 ci_high="%.9g" % (1.02 * median))
    elif s is not None:
        v.update(speedup="%.9g" % s, speedup_ci_low="%.9g" % (s * math.exp(-1.96 * se)),
                 speedup_ci_high="%.9g" % (s * math.exp(1.96 * se)),
                 timing_verdict=verdict or "within noise")
    else:
        v.update(timing_verdict="n/a", note="n/a on this backend", reps="", median="", unit="")
    if noise is not None:
        v["noise_floor"] = "%.9g" % noise
    return ",".join(v[c] for c in COLS)


def write_run(root, device, files, header=HEADER):
    folder = os.path.join(root, "results", device)
    os.makedirs(folder)
    for name, lines in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(header + "\n" + "".join(line + "\n" for line in lines))
    return folder


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True)
    print("$ compare_runs.py %s -> %d" % (" ".join(os.path.basename(a) for a in args),
                                          p.returncode))
    print(p.stdout + p.stderr)
    return p.returncode, p.stdout, p.stderr


def ten_rows(shifts, se=0.01, noise=0.015, loader_base=10.0):
    """Ten compared rows of two techniques, the k-th at 1.05 * exp(shifts[k])."""
    lines = {"steps.csv": [row("steps", "off", baseline=True, noise=noise)],
             "loader.csv": [row("loader", "workers=0", baseline=True, metric="epoch time",
                                median=loader_base)],
             "gelu.csv": [row("gelu", "fused", 1.2, 0.05, noise=0.04, metric="fwd time",
                              pname="elements", pval="1024")]}
    for k, sh in enumerate(shifts):
        s = 1.05 * math.exp(sh)
        if k < 6:
            lines["steps.csv"].append(row("steps", "set%d" % k, s, se, noise=noise))
        else:
            lines["loader.csv"].append(row("loader", "workers=%d" % k, s, se, noise=0.03,
                                           metric="epoch time"))
    return lines


def main():
    tmp = tempfile.mkdtemp(prefix="compare_runs_", dir=os.environ.get("TEST_TMPDIR"))
    zero = [0.0] * 10
    # se 0.01 on both sides: sqrt(2) * 0.01 = 0.014142; a shift of 0.03 gives
    # z = 2.1213 (outside 1.96), a shift of 0.02 gives z = 1.4142 (inside).
    one_out = [0.0] * 9 + [0.03]
    two_out = [0.0] * 8 + [0.03, -0.03]
    a = write_run(os.path.join(tmp, "a"), "cpu-test", ten_rows(zero))
    b = write_run(os.path.join(tmp, "b"), "cpu-test", ten_rows(one_out))
    c = write_run(os.path.join(tmp, "c"), "cpu-test", ten_rows(two_out))
    d = write_run(os.path.join(tmp, "d"), "cpu-test", ten_rows([0.02] * 10))

    print("== identical runs: every z is 0")
    rc, out, _ = run(a, a, "--metrics=step time,epoch time")
    check(rc == 0, "exit 0")
    check("agree: 10 of 10 rows within 1.96 (100.0%): PASS (at most 10% may exceed)" in out,
          "final line for identical runs")

    print("== one of ten rows at z = 2.12: 10% exceed, still PASS")
    rc, out, _ = run(a, os.path.join(tmp, "b", "results"), "--metrics=step time,epoch time")  # a root
    check(rc == 0, "exit 0")
    check("agree: 9 of 10 rows within 1.96 (90.0%): PASS" in out, "9 of 10 within")
    z_line = [l for l in out.splitlines() if l.startswith("loader workers=9")]
    check(len(z_line) == 1 and z_line[0].rstrip().endswith("2.12 *"), "z of the shifted row is 2.12")
    check("rows with z > 1.96: 1 of 10 (10.0%)" in out, "share above")

    print("== two of ten rows outside: FAIL")
    rc, out, _ = run(a, c, "--metrics=step time,epoch time")
    check(rc == 1, "exit 1")
    check("agree: 8 of 10 rows within 1.96 (80.0%): FAIL (at most 10% may exceed)" in out,
          "final line FAIL")

    print("== every row shifted by 0.02 (z = 1.41): PASS; the op row counts by default")
    rc, out, _ = run(a, d)
    check(rc == 0 and "agree: 11 of 11 rows within 1.96 (100.0%): PASS" in out,
          "11 rows with the gelu row")
    check(all(("%7.2f" % 1.41) in l for l in out.splitlines() if l.startswith("steps set")),
          "z = 1.41 on the shifted rows")
    # half-width of a row: exp(1.96 * 0.01) - 1 = 1.98%; noise floors: steps
    # 1.5% (6 rows), loader 3% (4 rows), gelu 4%
    check("step and loader rows (10 rows): median half-width 1.98% vs 1.98%, median noise floor "
          "1.50% vs 1.50%" in out, "medians of the step and loader rows")
    check("all matched rows (11 rows): median half-width 1.98% vs 1.98%, median noise floor "
          "1.50% vs 1.50%" in out, "medians over all rows")

    print("== disagreeing rows whose baseline moved between the runs are counted")
    c_moved = write_run(os.path.join(tmp, "cm"), "cpu-test", ten_rows(two_out, loader_base=14.0))
    rc, out, _ = run(a, c_moved, "--metrics=step time,epoch time")
    # the loader's baseline 10 ms [9.8, 10.2] -> 14 ms [13.72, 14.28]: its 4 rows moved, 2 of
    # them (workers=8, 9) disagree; the steps' baseline stayed
    check("baseline moved between the runs (its median's intervals do not overlap: the machine "
          "ran at another speed): 2 of 2 disagreeing rows, 2 of 8 agreeing rows" in out,
          "moved baselines counted per verdict")
    rc, out, _ = run(a, c, "--metrics=step time,epoch time")
    check("0 of 2 disagreeing rows, 0 of 8 agreeing rows" in out, "no baseline moved")

    print("== rows in one run only are listed, not counted")
    e_lines = ten_rows(zero)
    e_lines["steps.csv"].append(row("steps", "extra", 1.3, 0.01, noise=0.015))
    e_lines["steps.csv"].append(row("steps", "na_row"))  # an n/a row is not compared
    e = write_run(os.path.join(tmp, "e"), "cpu-test", e_lines)
    rc, out, _ = run(a, e)
    check(rc == 0 and "only in run 2 (not counted): steps extra (step time)" in out, "extra row listed")
    check("agree: 11 of 11 rows" in out, "extra row not counted")

    print("== machine probes of both runs printed beside each technique's disagreements")
    probe_header = ("technique,at_s,cpus,fma_alone_ms,fma_pair_ms,fma_pair_ratio,copy_alone_ms,"
                    "copy_pair_ms,copy_pair_ratio\n")
    for folder, ratio in ((a, "1.0010"), (c, "1.8200")):
        with open(os.path.join(folder, "machine_probe.csv"), "w") as f:
            f.write(probe_header + "steps,1.0,2,17.0000,17.0170,%s,1.4000,1.5400,1.1000\n" % ratio
                    + "loader,9.0,2,17.0000,17.0000,1.0000,1.4000,1.4000,1.0000\n")
    rc, out, _ = run(a, c, "--metrics=step time,epoch time")
    lines = out.splitlines()
    check(any(l.split()[:6] == ["loader", "2", "of", "4", "disagree", "1.0000"] and
              l.rstrip().endswith("| 1.0000 1.0000 17.0000") for l in lines),
          "loader: 2 of 4 rows disagree, both runs' probes")
    check(any(l.split()[:6] == ["steps", "0", "of", "6", "disagree", "1.0010"] and
              l.rstrip().endswith("| 1.8200 1.1000 17.0000") for l in lines),
          "steps: 0 of 6 disagree, run 2's compute pair ratio 1.82")
    with open(os.path.join(c, "machine_probe.csv"), "w") as f:
        f.write(probe_header.rstrip("\n") + ",cache_load_ns\n"
                + "steps,1.0,2,17.0000,17.0170,1.0010,1.4000,1.5400,1.1000,112.40\n")
    rc, out, _ = run(a, c, "--metrics=step time,epoch time")
    check(any(l.split()[:5] == ["steps", "0", "of", "6", "disagree"] and
              l.rstrip().endswith("| 1.0010 1.1000 17.0000 112.40") for l in out.splitlines()),
          "steps: run 2's cache walk (112.40 ns) printed after its compute time")
    rc, out, _ = run(a, d)
    check("machine before each technique" not in out, "no probe table when one run has none")

    print("== rows measured in another machine state (xcore_ns 3x apart) counted apart")
    xheader = HEADER + ",rounds,mde,stopped_by,unreliable,busy,load_avg,workload,model_gflops," \
        "gemm_ceiling,mfu,xcore_ns"

    def with_xcore(lines, ns, busy=()):
        """The rows of ten_rows with the schema-4 columns; row k's xcore_ns is ns[k]
        for the ten compared rows (the baselines and the gelu row: 60), and it is
        flagged busy when k is in busy."""
        out, k = {name: list(rows) for name, rows in lines.items()}, 0
        for name in ("steps.csv", "loader.csv"):
            for i, r in enumerate(out[name]):
                if i == 0:  # the baseline
                    out[name][i] = r + ",,,target,0,0,0.1,,,,,60"
                else:
                    out[name][i] = r + ",,,target,0,%d,0.1,,,,,%g" % (k in busy, ns[k])
                    k += 1
        out["gelu.csv"] = [r + ",,,target,0,0,0.1,,,,,60" for r in out["gelu.csv"]]
        return out
    fast = [60.0] * 10
    split = [60.0] * 8 + [330.0, 330.0]
    x1 = write_run(os.path.join(tmp, "x1"), "cpu-test", with_xcore(ten_rows(zero), fast),
                   header=xheader)
    x2 = write_run(os.path.join(tmp, "x2"), "cpu-test", with_xcore(ten_rows(two_out), split),
                   header=xheader)
    rc, out, _ = run(x1, x2)
    check(rc == 1 and "2 of 11 rows measured in another state in each run, 2 of them "
          "disagreeing" in out, "two loader rows in another state, both disagreeing")
    check("agree within one state: 9 of 9 rows measured in the same state" in out,
          "the rows of one state all agree")
    check("agree: 9 of 11 rows within 1.96" in out, "the verdict stays over all rows")
    rc, out, _ = run(x1, x2, "--same-state")
    check(rc == 0 and "9 of 11 matched rows were measured in the same machine state" in out and
          "agree: 9 of 9 rows within 1.96 (100.0%): PASS" in out,
          "--same-state: the check over the 9 rows of one state passes")
    x3 = write_run(os.path.join(tmp, "x3"), "cpu-test",
                   with_xcore(ten_rows(two_out), split, busy=(0,)), header=xheader)
    rc, out, _ = run(x1, x3)
    check("of them flagged busy in neither run: 8 of 8 within 1.96" in out,
          "a row flagged busy in one run is left out of the quiet count")
    check("flagged busy in neither run" not in run(x1, x2)[1],
          "no quiet count when no row is flagged busy")
    rc, out, _ = run(a, c)
    check("machine state" not in out, "no state line when the runs have no xcore_ns")
    rc, _, err = run(a, c, "--same-state")
    check(rc == 2 and "no row was measured in the same machine state" in err,
          "--same-state without xcore_ns: exit 2 with a message")

    print("== bad input: exit 2 with a message")
    rc, _, err = run(a, os.path.join(tmp, "missing"))
    check(rc == 2 and "not a folder" in err, "missing folder")
    rc, _, err = run(a)
    check(rc == 2 and "two results folders" in err, "one folder")
    bad = ten_rows(zero)
    bad["steps.csv"][1] = bad["steps.csv"][1].replace(",1.05,", ",fast,", 1)
    f = write_run(os.path.join(tmp, "f"), "cpu-test", bad)
    rc, _, err = run(a, f)
    check(rc == 2 and "speedup is not a number: 'fast'" in err, "non-numeric speedup")
    g = write_run(os.path.join(tmp, "g"), "cpu-test",
                  {"other.csv": [row("other", "x", 1.1, 0.01)]})
    rc, _, err = run(a, g)
    check(rc == 2 and "no compared row is in both runs" in err, "nothing in common")
    h_root = os.path.join(tmp, "h")
    write_run(h_root, "cpu-one", ten_rows(zero))
    os.makedirs(os.path.join(h_root, "results", "cpu-two"))
    with open(os.path.join(h_root, "results", "cpu-two", "x.csv"), "w") as fh:
        fh.write(HEADER + "\n")
    rc, _, err = run(a, os.path.join(h_root, "results"))
    check(rc == 2 and "several device folders" in err, "ambiguous root")
    dup = ten_rows(zero)
    dup["steps.csv"].append(dup["steps.csv"][1])
    i = write_run(os.path.join(tmp, "i"), "cpu-test", dup)
    rc, _, err = run(a, i)
    check(rc == 2 and "a second row for steps set0" in err, "duplicate row")

    print("== --before-after: per-technique medians side by side")
    wide = ten_rows(zero, se=0.05, noise=0.09)  # before: +-10.3% intervals, 9% floors
    w = write_run(os.path.join(tmp, "w"), "cpu-test", wide)
    rc, out, _ = run("--before-after", w, a)
    check(rc == 0, "exit 0")
    # exp(1.96 * 0.05) - 1 = 10.30%; loader rows keep their 3% floor
    check("| steps | 6 | 9.00% | 10.30% | 6 | 1.50% | 1.98% |" in out, "steps row of the table")
    check("| loader | 4 | 3.00% | 10.30% | 4 | 3.00% | 1.98% |" in out, "loader row of the table")
    check("gelu" not in out, "op-level rows left out (metric fwd time)")
    check("| **all step and loader rows** | 10 | 9.00% | 10.30% | 10 | 1.50% | 1.98% |" in out,
          "all rows")
    check("after: median half-width 1.98% (target <= 2%: met), median noise floor 1.50% "
          "(target <= 2%: met), rows above +-10%: 0 of 10" in out, "after meets the targets")
    check("before: median half-width 10.30% (target <= 2%: not met)" in out and
          "rows above +-10%: 10 of 10" in out, "before misses them")

    print("== --before-after with the paired schema's flags (stopped_by, busy)")
    flagged = ten_rows(zero)
    flagged["steps.csv"].append(row("steps", "wide_budget", 1.1, 0.06, noise=0.015))
    flagged["steps.csv"].append(row("steps", "wide_busy", 1.1, 0.06, noise=0.015))
    flagged["steps.csv"].append(row("steps", "wide_plain", 1.1, 0.06, noise=0.015))
    flags = {"wide_budget": ("budget", "0"), "wide_busy": ("target", "1"),
             "wide_plain": ("target", "0")}
    paired_files = {}
    for name, lines in flagged.items():
        out_lines = []
        for line in lines:
            setting = line.split(",")[3]
            stop, busy = flags.get(setting, ("target", "0"))
            out_lines.append(line + ",20,0.02,%s,0,%s,0.1" % (stop, busy))
        paired_files[name] = out_lines
    fl = write_run(os.path.join(tmp, "fl"), "cpu-test", paired_files,
                   HEADER + ",rounds,mde,stopped_by,unreliable,busy,load_avg")
    rc, out, _ = run("--before-after", a, fl)
    check(rc == 0 and "after: " in out and
          "rows above +-10%: 3 of 13 (interval or noise floor above +-10%: 3 rows, 2 of them "
          "flagged budget or busy, 1 unflagged)" in out, "flagged rows counted")
    check("before: " in out and "rows above +-10%: 0 of 10\n" in out, "no flag columns: nothing said")

    print("compare_runs_test: %s" % ("all passed" if not failures else "%d FAILED" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
