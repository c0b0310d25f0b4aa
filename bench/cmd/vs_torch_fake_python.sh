#!/bin/bash
# vs_torch_fake_python.sh: a stand-in for a Python with PyTorch, for
# vs_torch_slow_test.sh. `-c ...` (the import check) succeeds; `SCRIPT --serve
# ARGS...` says "ready", then answers "run K" at once with K * 0.05 seconds,
# except in a configuration whose arguments include $FAKE_SLOW (say
# --amp=bf16): there the first step never ends, as PyTorch's bf16 GPT-2 step
# all but never does on a CPU without avx512_bf16 (102 s).
[ "${1:-}" = "-c" ] && exit 0
slow=0
case " $* " in *" ${FAKE_SLOW:-none} "*) slow=1 ;; esac
echo ready
while read -r cmd k; do
  case "$cmd" in
    run)
      [ "$slow" = 1 ] && exec sleep 600
      printf '%d.%02d\n' $((k * 5 / 100)) $((k * 5 % 100)) ;;
    quit) exit 0 ;;
  esac
done
