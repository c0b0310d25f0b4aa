#!/bin/bash
# export_model_test.sh - bench:export_model on the small CNN (no PyTorch):
# every file is there with the size its shape gives (129,290 parameters, the
# small CNN's count in DESIGN.md), the manifest's tensors tile the flat buffer
# in order, one SGD step changed the parameters and the loss, a channels-last
# export writes the same initial parameters and batch (files are NCHW either
# way), a token model (GPT-2, one block) writes int32 ids with next-token
# labels and (N, T, vocab) logits, a ResNet-50 cut after one bottleneck has
# its closed-form count, and a refused optimizer or flag exits non-zero with
# nothing written.
#
#   bazel test //bench:export_model_test --test_output=errors
set -euo pipefail

bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

size_is() { # file bytes
    local got
    got=$(stat -c %s "$1" 2>/dev/null || echo missing)
    [[ "$got" == "$2" ]] || fail "$(basename "$1"): $got bytes, expected $2"
}

"$bin" --model=small_cnn --batch-size=3 --seed=7 --threads=1 --out="$tmp/nchw" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; fail "export exited non-zero"; }
grep -q "wrote $tmp/nchw" "$tmp/log" || fail "no 'wrote' line: $(cat "$tmp/log")"

params=129290
for f in params0 grads params1; do size_is "$tmp/nchw/$f.f32" $((params * 4)); done
size_is "$tmp/nchw/x.f32" $((3 * 1 * 28 * 28 * 4))
size_is "$tmp/nchw/labels.i32" $((3 * 4))
for f in logits0 logits1; do size_is "$tmp/nchw/$f.f32" $((3 * 10 * 4)); done

python3 - "$tmp/nchw" "$params" <<'EOF' || fail "manifest check"
import json, struct, sys
d, want = sys.argv[1], int(sys.argv[2])
m = json.load(open(d + "/manifest.json"))
errs = []
if m["numel"] != want:
    errs.append("numel %d, expected %d" % (m["numel"], want))
at = 0
for p in m["params"]:
    n = 1
    for s in p["shape"]:
        n *= s
    if p["offset"] != at or p["numel"] != n:
        errs.append("%s: offset %d numel %d shape %s, expected offset %d"
                    % (p["name"], p["offset"], p["numel"], p["shape"], at))
    at += p["numel"]
if at != want:
    errs.append("tensors cover %d floats of %d" % (at, want))
if len(m["params"]) != 28:
    errs.append("%d tensors, expected 28" % len(m["params"]))
if m["params"][0]["shape"] != [16, 1, 3, 3]:
    errs.append("first tensor %s, expected conv (16, 1, 3, 3)" % m["params"][0]["shape"])
if not m["loss1"] < m["loss0"]:
    errs.append("loss %g -> %g after one step on the same batch" % (m["loss0"], m["loss1"]))
p0 = open(d + "/params0.f32", "rb").read()
p1 = open(d + "/params1.f32", "rb").read()
moved = sum(a != b for a, b in zip(struct.iter_unpack("<f", p0), struct.iter_unpack("<f", p1)))
if moved < want // 2:
    errs.append("only %d of %d parameters moved in the step" % (moved, want))
labels = struct.unpack("<3i", open(d + "/labels.i32", "rb").read())
if not all(0 <= l < 10 for l in labels):
    errs.append("labels %s outside [0, 10)" % (labels,))
for e in errs:
    print("manifest:", e)
sys.exit(1 if errs else 0)
EOF

"$bin" --model=small_cnn --batch-size=3 --seed=7 --threads=1 --channels-last \
    --out="$tmp/nhwc" >"$tmp/log2" 2>&1 || { cat "$tmp/log2"; fail "channels-last export"; }
for f in params0.f32 x.f32 labels.i32; do
    cmp -s "$tmp/nchw/$f" "$tmp/nhwc/$f" || fail "$f differs between NCHW and channels-last"
done

# A token model, as small as GPT-2's fixed width allows (1 block, 4 tokens,
# vocabulary 5): int32 ids, next-token labels, (N, T, vocab) logits.
"$bin" --model=gpt2 --layers=1 --context=4 --vocab=5 --batch-size=2 --threads=1 \
    --out="$tmp/gpt2" >"$tmp/log4" 2>&1 || { cat "$tmp/log4"; fail "gpt2 export"; }
size_is "$tmp/gpt2/x.i32" $((2 * 4 * 4))
size_is "$tmp/gpt2/labels.i32" $((2 * 4 * 4))
for f in logits0 logits1; do size_is "$tmp/gpt2/$f.f32" $((2 * 4 * 5 * 4)); done
python3 - "$tmp/gpt2" <<'EOF' || fail "gpt2 manifest check"
import json, struct, sys
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
g = {"layers": 1, "heads": 12, "dim": 768, "mlp": 3072, "context": 4, "vocab": 5}
# GPT-2's closed form: wte, wpe, one block, ln_f (the head is tied)
want = 5 * 768 + 4 * 768 + (4 * 768 + 3 * 768 * 768 + 3 * 768 + 768 * 768 + 768
                            + 768 * 3072 + 3072 + 3072 * 768 + 768) + 2 * 768
errs = []
if m["gpt2"] != g:
    errs.append("dims %s, expected %s" % (m["gpt2"], g))
if m["numel"] != want or sum(p["numel"] for p in m["params"]) != want:
    errs.append("numel %d, expected %d" % (m["numel"], want))
if [p["shape"] for p in m["params"][:2]] != [[5, 768], [4, 768]]:
    errs.append("embeddings %s, expected wte (5, 768), wpe (4, 768)" % m["params"][:2])
if m["gelu"] != "tanh" or m["logits_shape"] != [2, 4, 5]:
    errs.append("gelu %s, logits %s" % (m["gelu"], m["logits_shape"]))
x = struct.unpack("<8i", open(d + "/x.i32", "rb").read())
y = struct.unpack("<8i", open(d + "/labels.i32", "rb").read())
for n in range(2):  # each label is the next token of the same sequence
    if any(y[n * 4 + t] != x[n * 4 + t + 1] for t in range(3)):
        errs.append("sample %d: labels %s are not the ids %s shifted" % (n, y, x))
if not all(0 <= v < 5 for v in x + y):
    errs.append("ids outside [0, 5)")
for e in errs:
    print("gpt2 manifest:", e)
sys.exit(1 if errs else 0)
EOF

# ResNet-50 cut after its first bottleneck (--resnet-blocks=1): stem 7x7
# conv + BN, one projection bottleneck 64 -> 256, head 256 -> 3, torchvision's
# bias-free convolutions (--conv-bias=auto): 85,315 parameters.
"$bin" --model=resnet50 --resnet-blocks=1 --image-size=32 --classes=3 --batch-size=2 \
    --threads=1 --out="$tmp/resnet1" >"$tmp/log5" 2>&1 || { cat "$tmp/log5"; fail "resnet50 export"; }
size_is "$tmp/resnet1/params0.f32" $((85315 * 4))
size_is "$tmp/resnet1/x.f32" $((2 * 3 * 32 * 32 * 4))
grep -q '"resnet_blocks": 1,' "$tmp/resnet1/manifest.json" || fail "manifest lacks resnet_blocks 1"
grep -q '"conv_bias": false,' "$tmp/resnet1/manifest.json" || fail "resnet50 has conv biases"
if "$bin" --model=small_cnn --resnet-blocks=2 --out="$tmp/rb" >"$tmp/log6" 2>&1; then
    fail "--resnet-blocks accepted on small_cnn"
fi

if "$bin" --optimizer=lars --out="$tmp/lars" >"$tmp/log3" 2>&1; then
    fail "--optimizer=lars accepted"
fi
grep -q "only sgd and adamw" "$tmp/log3" || fail "lars refusal says: $(cat "$tmp/log3")"
[[ ! -e "$tmp/lars" ]] || fail "a refused export left $tmp/lars"

if ((fails)); then
    echo "$fails failure(s)"
    exit 1
fi
echo "PASS"
