#!/bin/bash
# ddp_launch.sh - bazel run //bench:ddp -- --ranks=N [worker flags]
#
# Runs the DDP worker (bench/cmd/ddp_worker.c) under mpirun: -np N, --bind-to none
# (each rank runs its own kernel threads), --oversubscribe when N exceeds
# this host's cores, and --allow-run-as-root (plus OpenMPI's two variables)
# when run as root. --ranks defaults to the number of cores.
# Multi-host: --hostfile=FILE or --host=a:2,b:2 go to mpirun (see
# DISTRIBUTED.md, also for Slurm); BUILD_WORKSPACE_DIRECTORY and
# TB_DATA_DIR are exported to every rank.
set -euo pipefail
ranks=$(nproc)
mpi_args=()
worker_args=()
for a in "$@"; do
    case "$a" in
    --ranks=*) ranks="${a#--ranks=}" ;;
    --hostfile=*) mpi_args+=(--hostfile "${a#--hostfile=}") ;;
    --host=*) mpi_args+=(--host "${a#--host=}") ;;
    --mpirun-arg=*) mpi_args+=("${a#--mpirun-arg=}") ;;
    *) worker_args+=("$a") ;;
    esac
done
case "$ranks" in
    ''|*[!0-9]*|0*) echo "ddp: --ranks=$ranks: expected a whole number of ranks, 1 or more" >&2
                     exit 2 ;;
esac
command -v mpirun > /dev/null || {
    echo "ddp: mpirun not found: install OpenMPI (apt-get install openmpi-bin libopenmpi-dev)" >&2
    exit 2
}
here="$(cd "$(dirname "$0")" && pwd)"
worker=""
for c in "${RUNFILES_DIR:-/nonexistent}/tunebench/bench/ddp_worker" \
         "$0.runfiles/tunebench/bench/ddp_worker" "$here/ddp_worker" "bench/ddp_worker"; do
    if [ -x "$c" ]; then worker="$c"; break; fi
done
[ -n "$worker" ] || { echo "ddp: cannot find the ddp_worker binary next to $0" >&2; exit 2; }
worker="$(cd "$(dirname "$worker")" && pwd)/$(basename "$worker")"
flags=(-np "$ranks" --bind-to none)
if [ "$ranks" -gt "$(nproc)" ] && [ ${#mpi_args[@]} -eq 0 ]; then
    flags+=(--oversubscribe)
fi
if [ "$(id -u)" = 0 ]; then
    flags+=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
for v in BUILD_WORKSPACE_DIRECTORY TB_DATA_DIR; do
    [ -n "${!v:-}" ] && flags+=(-x "$v")
done
echo "ddp: mpirun ${flags[*]} ${mpi_args[*]:-} $worker ${worker_args[*]:-}" >&2
exec mpirun "${flags[@]}" "${mpi_args[@]}" "$worker" "${worker_args[@]}"
