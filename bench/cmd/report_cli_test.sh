#!/bin/bash
# report_cli_test.sh REPORT GOLDEN_CSV
# bench:report as a user runs it on a results folder: a CSV that is not
# tunebench's is left out with one warning (the folder is loaded once for
# the report and its findings), the report and the findings are written and
# exit 0; a folder with no results at all fails (exit 1) saying what to give.
set -euo pipefail
report="$1"; golden="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
dir="$tmp/results/cpu-test"
mkdir -p "$dir"
cp "$golden" "$dir/gelu.csv"
printf 'a,b\n1,2\n' > "$dir/notes.csv"
printf 'technique,setting,machine\ngelu,fused,m1\n' > "$dir/compare.csv"
rc=0
"$report" "$dir" > "$tmp/out.txt" 2> "$tmp/err.txt" || rc=$?
if [ "$rc" != 0 ]; then
    cat "$tmp/out.txt" "$tmp/err.txt"; echo "FAIL: bench:report exited $rc"; exit 1
fi
n=$(grep -c "notes.csv is not a tunebench results CSV" "$tmp/err.txt" || true)
[ "$n" = 1 ] || { cat "$tmp/err.txt"; echo "FAIL: the foreign CSV's warning printed $n times, want 1"; exit 1; }
for f in REPORT.md REPORT.html summary.md summary.tex; do
    [ -s "$dir/$f" ] || { echo "FAIL: no $f"; exit 1; }
done
grep -q "^bench:report: findings:" "$tmp/out.txt" || { cat "$tmp/out.txt"; echo "FAIL: no findings"; exit 1; }
grep -q "gelu" "$tmp/out.txt" || { cat "$tmp/out.txt"; echo "FAIL: the findings miss gelu"; exit 1; }
mkdir -p "$tmp/empty"
if "$report" "$tmp/empty" > /dev/null 2> "$tmp/err2.txt"; then
    echo "FAIL: an empty folder exited 0"; exit 1
fi
grep -q "no results here" "$tmp/err2.txt" || { cat "$tmp/err2.txt"; echo "FAIL: no reason given"; exit 1; }
for what in foreign fingerprint; do
    mkdir -p "$tmp/$what"
    if [ "$what" = foreign ]; then printf 'a,b\n1,2\n' > "$tmp/$what/x.csv"; else echo '{}' > "$tmp/$what/fingerprint.json"; fi
    if "$report" "$tmp/$what" > /dev/null 2> "$tmp/err3.txt"; then
        echo "FAIL: a folder with $what only exited 0"; exit 1
    fi
    grep -q "holds no tunebench results" "$tmp/err3.txt" || { cat "$tmp/err3.txt"; echo "FAIL: $what: no reason given"; exit 1; }
    [ ! -e "$tmp/$what/REPORT.md" ] || { echo "FAIL: $what: a report of nothing was written"; exit 1; }
done
echo PASS
