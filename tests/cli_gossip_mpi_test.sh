#!/usr/bin/env bash
# CLI scenarios of `orrery gossip run --runtime mpi` (decentral/mpi_runtime.h): `mpirun -np 4` runs give
# the in-process run's per-iteration metrics byte for byte (CSV at %.17g, every iteration), and the MPI
# runtime's bad input exits 2 with one error line. Without MPI in the build (or without mpirun) only the
# "unavailable" error is checked.
source "$(dirname "$0")/cli_lib.sh"
# OpenMPI's allocations that live until exit, for LeakSanitizer in sanitizer builds (full unwinding, so
# that the stacks reach OpenMPI's frames through its libraries built without frame pointers). Dynamic-TLS
# tracking off: with OpenMPI's dlopen'ed components, GCC 12's LeakSanitizer recorded a bogus dynamic TLS
# range (0x7787-0x400008889) and its stop-the-world tracer died on it at exit ("Tracer caught signal 11",
# abort) on the 6.18 kernel of 2026-11-26; the leak check itself still runs (mpi_lsan.supp is still read).
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "$0")" && pwd)/mpi_lsan.supp:fast_unwind_on_malloc=0:intercept_tls_get_addr=0"

small=(--problem logistic-nonconvex --samples 4000 --dim 6 --iters 40 --batch 20 --eval-every 1)

expect mpi-bad-runtime 2 "unknown runtime 'mpl'; did you mean 'mpi'" -- gossip run --runtime mpl --algo dsgd --topology ring:4 "${small[@]}"

out=$("$bin" gossip run --runtime mpi --algo dsgd --topology ring:4 "${small[@]}" 2>&1); rc=$?
if grep -q "built without MPI" <<<"$out"; then
  # A build without MPI: the runtime is reported unavailable, in one line, exit 2.
  if [ "$rc" -eq 2 ]; then pass=$((pass+1)); else echo "FAIL mpi-unavailable: exit $rc"; fail=$((fail+1)); fi
  one_line_error mpi-unavailable-line gossip run --runtime mpi --algo dsgd --topology ring:4 "${small[@]}"
  finish cli_gossip_mpi
  exit $?
fi
# Without mpirun, --runtime mpi runs as a single rank (MPI singleton): the in-process numbers.
if [ "$rc" -eq 0 ]; then pass=$((pass+1)); else echo "FAIL mpi-singleton: exit $rc: $(echo "$out" | tail -3)"; fail=$((fail+1)); fi
if ! command -v mpirun >/dev/null; then
  echo "cli_gossip_mpi: mpirun not found; skipping the 4-rank scenarios"
  finish cli_gossip_mpi
  exit $?
fi

# 4 ranks on any core count, also as root (CI containers).
mpi=(mpirun --oversubscribe -np 4)
if [ "$(id -u)" -eq 0 ]; then mpi+=(--allow-run-as-root); fi

# same NAME ARGS...: the in-process CSV and the 4-rank CSV must be identical files.
same() {
  local name=$1; shift
  local rc1 rc2
  "$bin" -q gossip run "$@" --csv "$tmp/$name.in.csv" >/dev/null 2>"$tmp/$name.in.err"; rc1=$?
  "${mpi[@]}" "$bin" -q gossip run --runtime mpi "$@" --csv "$tmp/$name.mpi.csv" >"$tmp/$name.mpi.out" 2>"$tmp/$name.mpi.err"; rc2=$?
  if [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ]; then
    echo "FAIL $name: exit $rc1 in-process, $rc2 under mpirun: $(grep -m5 -E 'Sanitizer|runtime error|caught signal' "$tmp/$name.mpi.err") $(tail -3 "$tmp/$name.mpi.err")"
    fail=$((fail+1)); return
  fi
  if cmp -s "$tmp/$name.in.csv" "$tmp/$name.mpi.csv" && [ "$(wc -l < "$tmp/$name.in.csv")" -gt 2 ]; then
    pass=$((pass+1))
  else
    echo "FAIL $name: the MPI run's metrics differ from the in-process run's"; fail=$((fail+1))
  fi
}

same mpi-dsgd --algo dsgd --topology ring:4 "${small[@]}"
same mpi-push-pull --algo push-pull --topology directed-ring:4:chords=0-2 "${small[@]}" --seeds 2
same mpi-mg-pull-diag-gt --algo mg-pull-diag-gt --rounds 2 --topology exponential:8 "${small[@]}" --lr 0.01
same mpi-one-peer --algo dsgd --topology one-peer-exponential:8 "${small[@]}"
same mpi-uneven-blocks --algo push-sum --topology random-strongly-connected:7:0.3:seed=2 "${small[@]}"
same mpi-sim-time --algo gt --topology ring:4 "${small[@]}" --compute-per-sample "1 ms" --link-latency "1 ms"
# Federated: clients train on their owners' ranks, the server sums the shared uploads in sampling order.
same mpi-fedavg --algo fedavg --nodes 7 "${small[@]}" --client-fraction 0.5 --local-steps 3
same mpi-scaffold-clock --algo scaffold --nodes 8 "${small[@]}" --client-fraction 0.5 \
  --heterogeneity "compute=lognormal:1ms:0.5,uplink=10Mb/s" --churn 0.3:0.05s
same mpi-fedbuff-qsgd --algo fedbuff --nodes 6 "${small[@]}" --compress qsgd:4 --buffer 3
same mpi-choco-qsgd --algo choco-sgd --topology ring:4 "${small[@]}" --compress qsgd:4
# Churn: the step's matrices on the present nodes, exchanged over the base graph's plans.
same mpi-churn --algo push-pull --topology exponential:8 "${small[@]}" --compute-per-sample "0.1 ms" --churn 0.3:5ms

# --json too: the document (which does not record --runtime) is byte-identical for 1 and 4 ranks.
"$bin" -q --json gossip run --algo push-pull --topology exponential:8 "${small[@]}" >"$tmp/j.in.json" 2>/dev/null
"${mpi[@]}" "$bin" -q --json gossip run --runtime mpi --algo push-pull --topology exponential:8 "${small[@]}" \
  >"$tmp/j.mpi.json" 2>/dev/null; rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$tmp/j.in.json" "$tmp/j.mpi.json" && grep -q '"final"' "$tmp/j.in.json"; then pass=$((pass+1)); else
  echo "FAIL mpi-json: exit $rc, or the 4-rank --json document differs from the in-process one"; fail=$((fail+1)); fi

# Only rank 0 prints: one table.
if [ "$(grep -c "^iter " "$tmp/mpi-dsgd.mpi.out")" -eq 1 ]; then pass=$((pass+1)); else echo "FAIL mpi-one-table"; fail=$((fail+1)); fi

# Bad input under mpirun: exit 2 and the error once (from rank 0), whatever mpirun adds around it.
mpi_error() {
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("${mpi[@]}" "$bin" gossip run --runtime mpi "$@" 2>&1); rc=$?
  if [ "$rc" -ne 2 ]; then echo "FAIL $name: exit $rc, expected 2: $(echo "$out" | head -5)"; fail=$((fail+1)); return; fi
  if [ "$(grep -c "^orrery: error: " <<<"$out")" -ne 1 ] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL $name: expected one error line matching /$pattern/: $(echo "$out" | head -5)"; fail=$((fail+1)); return
  fi
  pass=$((pass+1))
}
mpi_error mpi-fewer-nodes "runtime: the MPI runtime runs at least one node per rank, but 4 ranks share 3 nodes; start at most 3 ranks" \
  --algo dsgd --topology ring:3 "${small[@]}"
mpi_error mpi-async "runtime: asynchronous gossip time runs in-process only" \
  --algo push-sum --topology ring:4 "${small[@]}" --compute-per-sample "1 ms" --time async
mpi_error mpi-bad-algo "unknown algorithm 'dsdg'; did you mean 'dsgd'" --algo dsdg --topology ring:4 "${small[@]}"

finish cli_gossip_mpi
