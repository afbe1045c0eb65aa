#!/usr/bin/env bash
# mpi.test.sh: examples/mpi_allgather under Open MPI's mpirun with 2 and 4 ranks, on rxe0 and
# rxe1 by turns: rank and world size from the launcher's environment, the node connected through
# MPI_Allgather. Open MPI itself talks over loopback TCP (btl self,tcp on lo): the guest has no
# other network it could use. As root (the guest): --allow-run-as-root; more ranks than CPUs:
# --oversubscribe. The guest has no host name ("(none)", which Open MPI refuses): it gets one.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
TMP=$(mktemp -d) || exit
if ! command -v mpirun >/dev/null; then
    check "mpirun exists" 1 "no mpirun: tools/deps.sh installs openmpi-bin"
    tally
    exit
fi
case $(hostname 2>/dev/null) in "" | "(none)") hostname sfv-guest 2>/dev/null ;; esac
export OMPI_MCA_plm_rsh_agent=false  # every rank is local: never ssh
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_pml=ob1              # not the UCX/verbs transports: rxe is for safeverbs here
export OMPI_MCA_btl_base_warn_component_unused=0
for n in 2 4; do
    timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$n" build/mpi_allgather >"$TMP/out" 2>&1
    rc=$?
    ((rc == 0)) && [ "$(grep -c ', all right$' "$TMP/out")" -eq "$n" ] &&
        grep -q "rank 1 of $n on rxe1: got 0 from rank 0" "$TMP/out"
    result=$?
    if ((result == 0)); then check "mpirun -np $n mpi_allgather over rxe0/rxe1" 0 "$(sort "$TMP/out" | head -n 1)"
    else check "mpirun -np $n mpi_allgather over rxe0/rxe1" 1 "exit $rc: $(cat "$TMP/out")"; fi
done
tally
