#!/bin/bash
# checkpoint_test.sh WORKER - DDP on 2 ranks with --checkpoint=PATH: the
# job succeeds, PATH is a checkpoint whose header says rank 0 of 2 wrote it,
# its size is the header plus weights and optimizer state, rank 1 says it
# wrote nothing, exactly one rank says it wrote, no temporary is left.
set -euo pipefail
worker="$1"
dir="${TEST_TMPDIR:-$(mktemp -d)}/ckpt"
mkdir -p "$dir"
log="$dir/log"
bash "$(dirname "$0")/ddp_test.sh" --ranks=2 "$worker" --dataset=synthetic --data-limit=1024 \
    --test-limit=256 --batch-size=32 --max-steps=3 --comm-timeout=60 \
    --checkpoint="$dir/model.ckpt" >"$log" 2>&1 || { cat "$log"; echo "FAIL: the job failed"; exit 1; }
cat "$log"
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$dir/model.ckpt" ] || fail "no checkpoint at $dir/model.ckpt"
[ "$(grep -c 'wrote checkpoint' "$log")" = 1 ] || fail "not exactly one rank wrote"
grep -q '^rank 0: wrote checkpoint' "$log" || fail "rank 0 did not write"
grep -q '^rank 1: no checkpoint written' "$log" || fail "rank 1 did not report"
ls "$dir" | grep -q '\.tmp' && fail "temporary left: $(ls "$dir")"
python3 - "$dir/model.ckpt" <<'PY'
import os, struct, sys
p = sys.argv[1]
with open(p, "rb") as f:
    h = f.read(40)
magic, rank, world, step, numel, nstate, _ = struct.unpack("<8sIIQQII", h)
assert magic == b"TBCKPT1\n", magic
assert (rank, world) == (0, 2), (rank, world)
assert step == 3, step
size = os.path.getsize(p)
assert size == 40 + 4 * numel * (1 + nstate), (size, numel, nstate)
print("checkpoint: rank %d of %d wrote %d weights + %d state buffers after %d steps" %
      (rank, world, numel, nstate, step))
PY
echo PASS
