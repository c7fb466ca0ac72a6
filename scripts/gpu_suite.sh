#!/usr/bin/env bash
# The GPU suite, end to end, on a CUDA host: env -> compile -> parity (cold, then warm cache) -> GPU tests
# -> bench -> kernel and command A/B quality runs. Every step's log and exit code land in $OUT (default
# gpu-out/), and results/ is packed into $OUT/results.tgz so a remote run brings everything back.
#
#   scripts/gpu_suite.sh                 # every step
#   scripts/gpu_suite.sh parity bench    # chosen steps
#
# On a host without gguf, wheels in .whl/ are installed to a private target first (see README).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
if ! python3 -c "import gguf" 2>/dev/null && [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/strata-site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/strata-site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-/tmp/strata-cubin-cache}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(env compile parity gputests bench ab)

sb() { python3 -m strata_bench "$@"; }
step() {  # step NAME CMD...: run, log, record status and seconds
    local name=$1; shift
    local t0=$EPOCHREALTIME
    "$@" > "$out/$name.log" 2>&1
    local rc=$?
    printf '%-24s rc=%-3s %6.1fs\n' "$name" "$rc" "$(awk "BEGIN{print $EPOCHREALTIME - $t0}")" | tee -a "$out/status.txt"
    tail -n 4 "$out/$name.log"
}

for s in "${steps[@]}"; do
    case $s in
        env) step env sb env ;;
        compile) step compile sb compile --resources ;;
        parity)
            rm -rf "$STRATA_CACHE_DIR"
            step parity-cold sb parity -q
            step parity-warm sb parity -q ;;
        gputests) step gputests python3 -m pytest -q -m gpu -ra tests ;;
        bench)
            step bench-mmvq sb bench -q --family mmvq --cols 1,4,8 --budget 1
            step bench-dram sb bench -q --family mmvq --shape 131072x8192 --cols 1,8 --budget 1
            step bench-other sb bench -q --family q2warp,fp16deq,swiglu_q8,moe_combine,grouped,pfgemm --budget 1 ;;
        ab)
            step ab-aa sb ab --family mmvq --format iq2_xxs -k n1/ --a new --b new --pairs 20 -q
            step ab-kernel sb ab --family mmvq --format iq2_xxs -k n4/ --a old --b new --pairs 20 -q ;;
        *) echo "unknown step $s" | tee -a "$out/status.txt" ;;
    esac
done
tar czf "$out/results.tgz" results
cat "$out/status.txt"
