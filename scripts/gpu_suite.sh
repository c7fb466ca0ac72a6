#!/usr/bin/env bash
# The GPU suite, end to end, on a CUDA host: env -> compile -> parity (cold, then warm cache) -> the same
# cases under compute-sanitizer (memcheck, racecheck, initcheck, synccheck) -> output
# digests against a base tree -> the mmvq DRAM bench and its compare -> the user's weights, shapes and TOML
# kernels -> GPU tests -> every README command that needs a GPU -> measurement quality (A/A, planted 3%, repeatability) -> the other families' bench
# and the pfgemm cuBLAS reference -> the peer table -> --device all -> workload and its command A/B (last:
# at about 2.5 minutes the longest step, so a run under a time limit loses it first; STRATA_SUITE_DEADLINE and
# STRATA_SUITE_LIMIT below).
# Not in the default list, the experiments (experiments/<name>/): `tune` (mmvq launch candidates,
# experiments/mmvq_tune; STRATA_TUNE_WIDTHS="1 8", "_decoders1" for the one-column decoder candidates),
# `tune-more` (the other families' candidates: experiments/fp16deq_tune), `mma` (experiments/mmvq_mma),
# `speed` (issue 28's candidates, STRATA_SPEED_EXPERIMENTS, default "mmvq_coal": resources, parity, bench),
# `lanepair` (issue 37: new's iq1_s and iq2_xxs lane-pair passes, parity and bench beside new before them);
# `onecol` (issue 37 item 3: experiments/mmvq_onecol's one-column kernels, new's parity, and the experiment's parity and
# bench beside old, new and new before onecol-m moved into it);
# `onecol3` (issue 37 item 3: experiments/mmvq_onecol3's one-column iq3_xxs with mul7's signs, likewise);
# `onecol1m` (issue 37: experiments/mmvq_onecol1m's one-column iq1_m on mmvq_onecol with a selector table, likewise);
# `mma5` (issue 37 item 1: experiments/mmvq_mma5's tensor-core 8-column passes of iq1_m, iq2_xs, iq2_s, iq3_xxs and
# iq3_s, parity and bench beside old and new);
# `peer-run` (the README's peer table from one run: bench --ggml, bench --profile of the 1-column rows, the peer
# reports), `bench-base` and `bench-match-base` (after bench-dram: $BASE_TREE's DRAM bench on this card, compared);
# and the profiles `ncu`, `ncu-source`, `ncu-mma`, `ncu-rows` and `profile-rows` (issue 37: each row's binding
# resource). Every
# step's log and exit code land in $OUT (default gpu-out/), and results/ is packed into $OUT/results.tgz so a
# remote run brings everything back.
#
#   scripts/gpu_suite.sh                 # every step
#   scripts/gpu_suite.sh parity bench-dram  # chosen steps
#   scripts/gpu_suite.sh bench-dram bench-base bench-match-base  # speed against the base tree on any card
#
# On a host without gguf, wheels in .whl/ are installed to a private target first (see README).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
# Step logs go to their own folder and travel inside results.tgz: a remote run may bring back only a
# few files from $out.
logdir=$(mktemp -d)
mkdir -p "$out"
if ! python3 -c "import gguf" 2>/dev/null && [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/strata-site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/strata-site
fi
site_path=${PYTHONPATH:-}  # the private wheels' target, if any: a base tree's run needs them too
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-/tmp/strata-cubin-cache}
# The suite's command A/Bs are evidence to commit: into results/ (a user's own go to their cache by default).
export STRATA_RESULTS_DIR=${STRATA_RESULTS_DIR:-results}  # relative: provenance records it, and no host path
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(env compile parity sanitize digests bench-dram user gputests readme quality bench-families peer
                                 devices workload)
# The bench run a change's speed is checked against (digests: the tree it must give the same bits as). The
# committed file is an H100's: on another card, steps bench-base and bench-match-base time $BASE_TREE there.
BENCH_BASE=${STRATA_BENCH_BASE:-results/nvidia-h100-80gb-hbm3/bench-20261206T104215Z.json}
BASE_TREE=${STRATA_BASE_TREE:-.baseline}
# The formats of the peer table's profile: the seven 1-3-bit ones, iq4_xs and q8_0 (issue 37's targets).
PEER_PROFILE_FORMATS=iq1_s,iq1_m,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s,iq4_xs,q8_0

sb() { python3 -m strata_bench "$@"; }
export -f sb  # steps under `timeout` run in a child bash, which needs the function
# The newest bench summary of this card (results/<device-slug>/, whichever card this is; not tune/ or repeat/).
newest_bench() { ls -t results/*/bench-*.json 2>/dev/null | head -1; }
# The base tree's strata-bench (its own package, not this checkout's), run from inside that tree.
base_sb() { (cd "$BASE_TREE" && PYTHONPATH="${site_path:+$site_path:}$PWD" python3 -m strata_bench "$@"); }
export -f base_sb
export BASE_TREE site_path
# STRATA_SUITE_DEADLINE=S: steps that would start after S seconds are skipped (and said so).
# STRATA_SUITE_LIMIT=S: the whole suite ends within S seconds: each step runs under `timeout` with what is
# left less PACK_S for packing (rc 124 when it is cut), so a run under an outer time limit always packs
# what it made. (A step that began before the deadline and ran past the outer limit lost a whole run's
# results once: nothing is packed until the end.)
deadline=${STRATA_SUITE_DEADLINE:-0}
limit=${STRATA_SUITE_LIMIT:-0}
PACK_S=20
suite_start=$EPOCHREALTIME
step() {  # step NAME CMD...: run, log, record status and seconds
    local name=$1; shift
    local elapsed; elapsed=$(awk "BEGIN{print int($EPOCHREALTIME - $suite_start)}")
    if [ "$deadline" != 0 ] && [ "$elapsed" -gt "$deadline" ]; then
        printf '%-24s skipped: past the %ss deadline\n' "$name" "$deadline" | tee -a "$logdir/status.txt"
        return
    fi
    local left=0
    if [ "$limit" != 0 ]; then
        left=$((limit - PACK_S - elapsed))
        if [ "$left" -lt 5 ]; then
            printf '%-24s skipped: the %ss limit is reached\n' "$name" "$limit" | tee -a "$logdir/status.txt"
            return
        fi
    fi
    local t0=$EPOCHREALTIME
    if [ "$left" != 0 ]; then
        timeout "$left" bash -c '"$@"' step "$@" > "$logdir/$name.log" 2>&1
    else
        "$@" > "$logdir/$name.log" 2>&1
    fi
    local rc=$?
    printf '%-24s rc=%-3s %6.1fs\n' "$name" "$rc" "$(awk "BEGIN{print $EPOCHREALTIME - $t0}")" | tee -a "$logdir/status.txt"
    tail -n 4 "$logdir/$name.log"
}

# `engine` (issue 36; not in the default list): build llama.cpp's CUDA engine from $STRATA_ENGINE_TREE (default
# .llama, carried) and from two planted copies (scripts/engine_plant.py), requantize the model
# ($STRATA_ENGINE_MODEL, default .models/gemma-3-270m-q4_k_m.gguf, or its four carried parts joined and checked),
# then the A/Bs of the issue's "Done when": A/A (speed, tokens, logits), the planted 3% mul_mat_vec_q slowdown
# (speed, tokens), the one-ulp iq4_xs dot (tokens, logits with KL divergence), GGML_CUDA_DISABLE_FUSION within A.
# `engine-build` and `engine-ab` are its halves: a build cut by a time limit resumes where it stopped (same
# workspace, ninja), so a second call finishes it; engine-ab finds the builds in the cache. Builds and models
# live in /tmp/strata-engine. The ulp A/Bs exit 1 when tokens or logits differ: that is their expected result.
# Builds made on another host (the CPU host, in the background: issue 36 measured both ways) travel as
# $STRATA_ENGINE_BINS/engines.tar.xz.partNN (default .engine, carried over several calls: scripts/engine_carry.py);
# they unpack to $eng/bins/{a,slow,ulp}, checked file by file, beside the builds' records (builds.json), and
# no build runs here. STRATA_ENGINE_PAIRS: the speed A/Bs' pairs (default 10).
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
engine_prebuilt() {  # ENG: prints the folder of carried builds, or nothing
    local bins=${STRATA_ENGINE_BINS:-.engine}
    ls "$bins"/engines.tar.xz.part?? >/dev/null 2>&1 || return 0
    if [ ! -x "$1/bins/a/llama-bench" ]; then
        python3 scripts/engine_carry.py unpack "$bins" "$1/bins" >> "$logdir/status.txt" 2>&1 || return 0
    fi
    echo "$1/bins"
}
engine_libraries() {  # the CUDA libraries the builds link, where the loader does not know them (a pip-installed
    local lib dir   # toolkit, e.g. PyTorch's nvidia/cu13/lib): their folder joins LD_LIBRARY_PATH
    for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
        ldconfig -p | grep -q "$lib" && continue
        dir=$(find /usr/local /opt /usr/lib -name "$lib" -not -path '*/stubs/*' 2>/dev/null | head -n 1)
        [ -n "$dir" ] && export LD_LIBRARY_PATH="$(dirname "$dir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    done
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" | tee -a "$logdir/status.txt"
}
engine_wanted() {  # STRATA_ENGINE_ABS: which A/Bs of engine-ab run (default all eight and the noise probe, by
    # the name after engine-)
    [[ " ${STRATA_ENGINE_ABS:-aa-speed aa-tokens aa-logits slow-speed slow-tokens ulp-tokens ulp-logits env-fusion noise} " \
        == *" $1 "* ]]
}
engine_step() {
    local what=$1 tree=${STRATA_ENGINE_TREE:-.llama} eng=/tmp/strata-engine
    local model=${STRATA_ENGINE_MODEL:-.models/gemma-3-270m-q4_k_m.gguf}
    mkdir -p "$eng"
    if [ ! -f "$model" ] && ls "$model".part0? >/dev/null 2>&1; then
        cat "$model".part0? > "$eng/model.gguf" && model=$eng/model.gguf
        echo "$GEMMA_SHA256  $model" | sha256sum -c - | tee -a "$logdir/status.txt"
    fi
    local A S U prebuilt pairs=${STRATA_ENGINE_PAIRS:-10}
    prebuilt=$(engine_prebuilt "$eng")
    engine_libraries
    if [ -n "$prebuilt" ]; then
        A=$prebuilt/a S=$prebuilt/slow U=$prebuilt/ulp
        cp "$prebuilt/builds.json" "$logdir/engine-builds.json"
        printf '%-24s carried builds: %s\n' engine-build "$(ls "$prebuilt" | tr '\n' ' ')" | tee -a "$logdir/status.txt"
    else
        # The builds run in every half: in engine-ab they are cache hits (seconds) that print where the engines are.
        python3 scripts/engine_plant.py slow-mmvq "$tree" "$eng/tree-slow" > "$logdir/engine-plant-slow.log" 2>&1
        python3 scripts/engine_plant.py ulp-iq4_xs "$tree" "$eng/tree-ulp" > "$logdir/engine-plant-ulp.log" 2>&1
        for t in a slow ulp; do
            local src=$tree; [ $t = a ] || src=$eng/tree-$t
            STRATA_CACHE_DIR=$eng step "engine-build-$t" sb engine build "$src" --arch 90
        done
        A=$(tail -n 1 "$logdir/engine-build-a.log"); S=$(tail -n 1 "$logdir/engine-build-slow.log")
        U=$(tail -n 1 "$logdir/engine-build-ulp.log")
    fi
    [ "$what" = engine-build ] && return
    if [ ! -x "$A/llama-bench" ]; then
        printf '%-24s skipped: no engine A built (%s)\n' engine-ab "$A" | tee -a "$logdir/status.txt"; return
    fi
    local text=examples/engine/calibration.txt q=$eng/iq4_xs.gguf
    # An IQ4_XS model requantized elsewhere by A's own llama-quantize (STRATA_ENGINE_IQ4XS, its parts joined):
    # the A/Bs' model, carried in fewer parts than the Q4_K_M it came from; no quantization runs here then.
    local carried=${STRATA_ENGINE_IQ4XS:-.models/gemma-3-270m-iq4_xs.gguf}
    if ls "$carried".part?? >/dev/null 2>&1; then
        cat "$carried".part?? > "$q"
        printf '%-24s carried: %s (sha256 %s)\n' engine-quantize "$carried" "$(sha256sum "$q" | cut -c1-16)" \
            | tee -a "$logdir/status.txt"
    else
        step engine-quantize-iq4_xs "$A/llama-quantize" --allow-requantize "$model" "$q" IQ4_XS
        step engine-quantize-q8_0 "$A/llama-quantize" --allow-requantize "$model" "$eng/q8_0.gguf" Q8_0
        step engine-quantize-iq3_s "$A/llama-quantize" --allow-requantize "$model" "$eng/iq3_s.gguf" IQ3_S
        step engine-imatrix "$A/llama-imatrix" -m "$eng/q8_0.gguf" -f "$text" -c 128 -ngl 99 -o "$eng/imatrix.dat"
        step engine-quantize-iq2_xxs "$A/llama-quantize" --allow-requantize --imatrix "$eng/imatrix.dat" "$model" \
            "$eng/iq2_xxs.gguf" IQ2_XXS
    fi
    # -r 10: a 270M model's prompt tests take about 10 ms a repetition, run while the GPU's clocks still ramp up
    # after the model load; at -r 3 one process's pp figures spread 2-8% on an H100, ten repetitions average that
    local bench="-m $q -p 64,128,256,512,1024 -n 128 -r 10 -ngl 99 -o json" ab=(sb ab -q --order abba --warmup 1)
    local port=8091
    local client="python3 -m strata_bench engine complete --port $port --prompt-file $text -n 64 --seed 1"
    local tokens=(--pairs 4 --ready-port $port --same 'tokens=tokens sha256: (\w+)'
                  --metric 'gen:higher:t/s=generation: \d+ tokens, ([0-9.]+) t/s' --a "$client" --b "$client" -o md)
    # -ub 8: micro-batches of 8 tokens take mul_mat_vec_q, as decoding does (mmq, which larger batches take,
    # never calls the planted iq4_xs dot: scripts/engine_plant.py)
    local ppl="-m $q -f $text -c 128 -ub 8 -ngl 99" base=$eng/base.kld
    local logits=(--pairs 2 --shell --setup "$A/llama-perplexity $ppl --kl-divergence-base $base"
                  --same 'logits=^([0-9a-f]{64})  ' --same 'kld=Mean\s+KLD:\s+(\S+)' --same 'top1=Same top p:\s+(\S+)' -o md)
    logits_run() { echo "$1/llama-perplexity $ppl --kl-divergence-base $eng/own.kld > /dev/null 2>&1 && sha256sum $eng/own.kld && $1/llama-perplexity $ppl --kl-divergence-base $base --kl-divergence"; }
    # the mean of llama-bench's repetitions (its own figure) and their median: the first repetitions of a process
    # run slower (scripts/engine_noise.py), which the median leaves out; A/A adds pairs while a verdict is open
    local speed=(--metric-json llama-bench --metric-json llama-bench-median)
    engine_wanted aa-speed && step engine-aa-speed "${ab[@]}" --pairs "$pairs" --until-decided $((2 * pairs)) "${speed[@]}" \
        --a "$A/llama-bench $bench" --b "$A/llama-bench $bench" -o md
    engine_wanted aa-tokens && step engine-aa-tokens "${ab[@]}" "${tokens[@]}" --server "$A/llama-server -m $q --port $port -ngl 99"
    engine_wanted aa-logits && step engine-aa-logits "${ab[@]}" "${logits[@]}" --a "$(logits_run "$A")" --b "$(logits_run "$A")"
    engine_wanted slow-speed && step engine-slow-speed "${ab[@]}" --pairs "$pairs" "${speed[@]}" --a "$A/llama-bench $bench" \
        --b "$S/llama-bench $bench" -o md
    # one --server for both arms: the arm's environment says whose llama-server starts
    engine_wanted slow-tokens && step engine-slow-tokens "${ab[@]}" "${tokens[@]}" --server "\$BIN/llama-server -m $q --port $port -ngl 99" \
        --env-a "BIN=$A" --env-b "BIN=$S"
    engine_wanted ulp-tokens && step engine-ulp-tokens "${ab[@]}" "${tokens[@]}" --server "\$BIN/llama-server -m $q --port $port -ngl 99" \
        --env-a "BIN=$A" --env-b "BIN=$U"
    engine_wanted ulp-logits && step engine-ulp-logits "${ab[@]}" "${logits[@]}" --a "$(logits_run "$A")" --b "$(logits_run "$U")"
    engine_wanted env-fusion && step engine-env-fusion "${ab[@]}" --pairs "$pairs" --metric-json llama-bench --env-a GGML_CUDA_DISABLE_FUSION=1 \
        --env-b GGML_CUDA_DISABLE_FUSION=0 -- "$A/llama-bench" $bench
    # where the prompt figures' run-to-run spread comes from (plain, pinned, after a GPU-busy run): scripts/engine_noise.py
    engine_wanted noise && step engine-noise python3 scripts/engine_noise.py "$A/llama-bench" "$q" \
        --out "$logdir/engine-noise.json"
}

AB_CASE=(--family mmvq --format iq2_xs -k '4096x14336/n1/')
REP_CASE=(--family mmvq --format iq4_xs -k '131072x8192/n1/' --cols 1)
METRIC='prefill \d+ tokens in (?P<value>[0-9.]+) ms'
# STRATA_GGML_PARTS: which parts of step ggml run (default all): first (every family from an empty cache, timed),
# core (the mat-vec, dequant, q8_1, fp16deq and grouped variants), fuse (swiglu_q8, moe_combine), mmq, pfgemm,
# bench; a part's --ggml-b plants run with it.
ggml_part() { [[ " ${STRATA_GGML_PARTS:-first core fuse mmq pfgemm bench} " == *" $1 "* ]]; }
for s in "${steps[@]}"; do
    case $s in
        env) step env sb env ;;
        compile) step compile sb compile --resources ;;
        parity)
            rm -rf "$STRATA_CACHE_DIR"
            step parity-cold sb parity -q --profile
            step parity-warm sb parity -q --profile ;;
        sanitize)  # the default cases under each compute-sanitizer tool, one launch per case and variant, two
                   # tools at a time (racecheck/synccheck only where a kernel may use shared memory or a
                   # barrier): one line per finding, a line per tool with its skips, exit 1 on any
            step sanitize sb parity -q --sanitize memcheck,racecheck,initcheck,synccheck ;;
        sanitize-fast)  # the same without racecheck, for a run short of device time
            step sanitize-fast sb parity -q --sanitize memcheck,initcheck,synccheck ;;
        digests)  # every output of every case, this tree against $BASE_TREE (e.g. `git archive` of the last landing)
            if [ -d "$BASE_TREE/strata_bench" ]; then
                step digests-base python3 scripts/output_digests.py "$BASE_TREE" /tmp/digests-base.json -q --results /tmp/base-results
                step digests-new python3 scripts/output_digests.py . /tmp/digests-new.json -q --results /tmp/new-results
                step digests-compare python3 scripts/output_digests.py --compare /tmp/digests-base.json /tmp/digests-new.json
            else
                printf '%-24s skipped: no base tree at %s\n' digests "$BASE_TREE" | tee -a "$logdir/status.txt"
            fi ;;
        gputests)  # the experiments' GPU tests too; the README's commands are step readme's
            # STRATA_GPUTESTS: the paths to collect (default every test folder), e.g. a change's own files
            step gputests python3 -m pytest -q -m gpu -ra ${STRATA_GPUTESTS:-tests experiments} \
                --ignore=tests/test_readme_gpu.py ;;
        readme)  # every README example that needs a GPU, as a reader types it (the CPU test runs only their --list)
            step readme python3 -m pytest -q -ra --durations=0 tests/test_readme_gpu.py ;;
        bench-dram)
            step bench-mmvq-dram sb bench -q --family mmvq --shape 131072x8192 --cols 1,4,8 --budget 1
            new=$(newest_bench)
            echo "$new" > "$logdir/bench-dram.path"
            step bench-match sb compare "$BENCH_BASE" "$new" --allow-different --fail-on-regression 2 -o md
            step bench-refuse sb compare "$BENCH_BASE" "$new" ;;  # exit 2 expected when the kernel sources differ
        bench-base)  # $BASE_TREE's DRAM bench on this card (the committed base is an H200's), kept out of results/
            if [ -d "$BASE_TREE/strata_bench" ]; then
                rm -rf /tmp/base-bench
                step bench-base-dram base_sb bench -q --family mmvq --shape 131072x8192 --cols 1,4,8 --budget 1 \
                    --results /tmp/base-bench
                ls -t /tmp/base-bench/*/bench-*.json 2>/dev/null | head -1 > "$logdir/bench-base.path"
                # kept with the logs (a base tree's records are not this tree's results: results verify)
                gzip -nc "$(cat "$logdir/bench-base.path")" > "$logdir/bench-base.json.gz" 2>/dev/null
            else
                printf '%-24s skipped: no base tree at %s\n' bench-base "$BASE_TREE" | tee -a "$logdir/status.txt"
            fi ;;
        bench-match-base)  # this tree's DRAM bench (step bench-dram) against the base tree's on the same card
            base=$(cat "$logdir/bench-base.path" 2>/dev/null)
            new=$(cat "$logdir/bench-dram.path" 2>/dev/null)
            if [ -n "$base" ] && [ -n "$new" ]; then
                step bench-match-base sb compare "$base" "$new" --allow-different --fail-on-regression 2 -o md
            else
                printf '%-24s skipped: run steps bench-dram and bench-base first\n' bench-match-base \
                    | tee -a "$logdir/status.txt"
            fi ;;
        bench-grouped)  # the grouped experts alone (8 and 32 entries an expert), as bench-families times them
            step bench-grouped sb bench -q --family grouped --budget 0.5 -o md ;;
        bench-peer) step bench-mmvq-peer sb bench -q --family mmvq --shape 4096x14336 --cols 1,4,8 --budget 1 ;;
        bench-families)  # the other families' bench cases (grouped: >= 4x the L2 touched; q2warp on the DRAM shape)
            step bench-families sb bench -q --family q2warp,grouped,fp16deq,swiglu_q8,moe_combine --budget 0.5
            step bench-pfgemm sb bench -q --family pfgemm --budget 0.5
            pf=$(newest_bench)
            step pfgemm-reference python3 scripts/pfgemm_reference.py "$pf" --budget 0.5 ;;
        peer)  # the README's table: the newest mmvq DRAM bench against llama.cpp's figures (CPU only)
            dram=$(cat "$logdir/bench-dram.path" 2>/dev/null || echo "$BENCH_BASE")
            step peer-md sb report --peer docs/peer_llamacpp_h200.csv "$dram" -o md
            step peer-csv sb report --peer docs/peer_llamacpp_h200.csv "$dram" -o csv ;;
        peer-run)  # the README's peer table from one run: the DRAM bench with llama.cpp's kernels beside old and new
            # (a tree as step ggml's), what binds each 1-column row of issue 37's formats (bench --profile), then the
            # peer step's commands and ggml's share on that same run's file
            tree=${STRATA_GGML_TREE:-.ggml}
            step peer-run-bench sb bench -q --ggml "$tree" --family mmvq --shape 131072x8192 --cols 1,8 --budget 0.5
            run=$(newest_bench)
            echo "$run" > "$logdir/peer-run.path"
            step peer-run-profile sb bench -q --profile --family mmvq --format "$PEER_PROFILE_FORMATS" \
                --shape 131072x8192 --cols 1 --budget 0.1 -o md
            step peer-run-ggml sb report --peer ggml "$run" -o md
            step peer-run-md sb report --peer docs/peer_llamacpp_h200.csv "$run" -o md
            step peer-run-csv sb report --peer docs/peer_llamacpp_h200.csv "$run" -o csv ;;
        quality)
            step ab-kernel-aa sb ab -q --order abba --pairs 20 "${AB_CASE[@]}" --a new --b new
            step ab-kernel-planted sb ab -q --order abba --pairs 20 "${AB_CASE[@]}" --a new --b 'new*1.03'
            step ab-kernel-old-new sb ab -q --order abba --pairs 20 "${AB_CASE[@]}" --a old --b new
            rm -rf results/repeat
            for i in 1 2 3 4 5; do step "bench-repeat-$i" sb bench -q "${REP_CASE[@]}" --results results/repeat; done
            step bench-spread python3 scripts/bench_spread.py results/repeat/*/bench-*.json ;;
        workload)  # the seed-style engine A/B: two prompt sizes, decode tok/s, output identity, a decode-length matrix
            step workload sb workload --tokens 128,512
            step ab-workload sb ab -q --order abba --pairs 6 --warmup 1 --env-a STRATA_OLD_IQ_MMVQ=1 \
                --env-b STRATA_OLD_IQ_MMVQ=0 \
                --metric 'prefill=prefill (?P<key>\d+) tokens in (?P<value>[0-9.]+) ms' \
                --metric 'decode:higher=decode \d+ tokens in [0-9.]+ ms: ([0-9.]+) tokens/s' \
                --same 'logits=logits sha256 (?P<key>\d+): (?P<value>[0-9a-f]+)' \
                --same 'tokens=decode sha256: ([0-9a-f]+)' --param decode=32,256 --timeout 300 -o md \
                -- python3 -m strata_bench workload --tokens 128,512 --decode '{decode}' --layers 2 ;;
        user)  # the user's own weights, shapes and TOML-declared kernels (issue 10)
            TOML=examples/toml_variant/variants.toml
            step compile-toml sb compile --variants "$TOML" --arch 90
            step parity-toml sb parity -q --variants "$TOML" --family mmvq
            step parity-toml-dequant sb parity -q --variants examples/dequant_rows/variants.toml --family dequant
            step parity-gguf sb parity -q --gguf tests/data/gguf/other-rows.gguf --tensor 'blk\.(0|1)\.ffn_' -o md
            step parity-gguf-real sb parity -q --gguf tests/data/gguf/smollm2-embd-rows.gguf --tensor token_embd \
                --rows 0:128 -o md
            step bench-toml sb bench -q --variants "$TOML" --family mmvq --shape 131072x8192 --cols 1,8 --budget 0.5
            step ab-toml sb ab -q --order abba --pairs 10 --family mmvq --variants "$TOML" --a old --b row8 --format iq3_s \
                --shape 131072x8192 --cols 8 ;;
        devices)  # --device all on the devices this host has (issue 15; one GPU here)
            step env-devices sb env
            step parity-device-all sb parity -q --device all --family dequant,q8_1 -o md --results /tmp/device-all
            step bench-device-all sb bench -q --family mmvq --format q8_0 --shape 131072x8192 --cols 1 --device all \
                --budget 0.5 --results /tmp/device-all ;;
        tune)  # launch candidates of mmvq_new (experiments/mmvq_tune), every one checked bitwise against old
            widths=${STRATA_TUNE_WIDTHS:-1 8}
            fams=$(printf 'mmvq_tune%s,' $widths)
            step tune-resources sb compile --resources --cases experiments/mmvq_tune/cases.py --family "${fams%,}"
            for w in $widths; do
                step "tune-$w" sb bench -q --cases experiments/mmvq_tune/cases.py --family "mmvq_tune$w" --budget 0.3 \
                    --results results/tune -o md
            done ;;
        tune-more)  # the other families' tuning candidates (experiments/<family>_tune): parity over the family's cases, then bench
            for f in fp16deq; do
                cases="experiments/${f}_tune/cases.py"
                [ -f "$cases" ] || continue
                step "tune-$f-parity" sb parity -q --cases "$cases" --family "${f}_tune"
                step "tune-$f" sb bench -q --cases "$cases" --family "${f}_tune" --budget 0.5 \
                    --results results/tune -o md
            done ;;
        mma)  # the tensor-core mmvq experiment (experiments/mmvq_mma): resources, bitwise parity against old, bench
            step mma-resources sb compile --arch 90 --cases experiments/mmvq_mma/cases.py --family mmvq_mma --resources
            step mma-parity sb parity -q --cases experiments/mmvq_mma/cases.py --family mmvq_mma
            step mma-bench sb bench -q --cases experiments/mmvq_mma/cases.py --family mmvq_mma --budget 0.5 \
                --results results/tune -o md ;;
        ggml)  # llama.cpp's kernels from an unchanged ggml tree ($STRATA_GGML_TREE, default .ggml: carried), issues 24
            # and 35: build, parity of every family and format, --ggml-b with an unchanged copy (passes) and with a
            # one-line change in iq2_xxs's dot, one in the MoE path's SwiGLU and one in the MoE weighted reduction
            # (each caught: exit 1), and the DRAM benches with ggml beside old and new
            tree=${STRATA_GGML_TREE:-.ggml}
            rm -rf /tmp/ggml-same /tmp/ggml-planted /tmp/ggml-planted-moe /tmp/ggml-planted-mmq /tmp/ggml-planted-fuse \
                && cp -r "$tree" /tmp/ggml-same && cp -r "$tree" /tmp/ggml-planted && cp -r "$tree" /tmp/ggml-planted-moe \
                && cp -r "$tree" /tmp/ggml-planted-mmq && cp -r "$tree" /tmp/ggml-planted-fuse
            sed -i 's|sumi = sumi \* ls / 8; |sumi = sumi * ls / 8 + 1; |' /tmp/ggml-planted/ggml/src/ggml-cuda/vecdotq.cuh
            grep -c 'sumi \* ls / 8 + 1' /tmp/ggml-planted/ggml/src/ggml-cuda/vecdotq.cuh > "$logdir/ggml-planted.txt"
            # The MoE path's one-line change: the fused SwiGLU, both of its lines (mul_mat_vec_q's, which grouped's
            # variant ggml launches, and mul_mat_vec_q_moe's, which ggml_moe launches): 2 lines changed.
            sed -i 's|result \*= ggml_cuda_op_silu_single(gate_value);|result *= ggml_cuda_op_silu_single(gate_value) * 1.0001f;|' \
                /tmp/ggml-planted-moe/ggml/src/ggml-cuda/mmvq.cu
            grep -c 'silu_single(gate_value) \* 1.0001f' /tmp/ggml-planted-moe/ggml/src/ggml-cuda/mmvq.cu \
                > "$logdir/ggml-planted-moe.txt"
            # mul_mat_q's one-line change: one unit more in each 32-value int8 dot of the NVIDIA MMA path (q4_0,
            # q5_0, q8_0 and the i-quants' dot).
            sed -i 's|+= C.x\[l\]\*dA\[n\]\[l/2\]\[k01/QI8_0\]\*dB\[l%2\];|+= (C.x[l] + 1)*dA[n][l/2][k01/QI8_0]*dB[l%2];|' \
                /tmp/ggml-planted-mmq/ggml/src/ggml-cuda/mmq-vec-dot.cuh
            grep -c '(C.x\[l\] + 1)\*dA' /tmp/ggml-planted-mmq/ggml/src/ggml-cuda/mmq-vec-dot.cuh \
                > "$logdir/ggml-planted-mmq.txt"
            # and one in the min term of vec_dot_q8_1_q8_1_mma (q4_1, q5_1, q4_k, q5_k, iq1_s): 1.0001 times itself
            sed -i 's|+= dmA\[n\]\[l/2\]\[k01/QI8_1\].y\*dsB\[l%2\].y;|+= dmA[n][l/2][k01/QI8_1].y*dsB[l%2].y*1.0001f;|' \
                /tmp/ggml-planted-mmq/ggml/src/ggml-cuda/mmq-vec-dot.cuh
            grep -c 'dsB\[l%2\].y\*1.0001f' /tmp/ggml-planted-mmq/ggml/src/ggml-cuda/mmq-vec-dot.cuh \
                >> "$logdir/ggml-planted-mmq.txt"
            # moe_combine's one-line change: each expert's term of the fused MoE weighted reduction 1.0001 times
            # itself (every moe_combine case: ggml's chain runs it for top-k 2 to 15)
            sed -i 's|sum += (experts\[row \* n_embd + col\] \* scale) \* weights\[row\];|sum += (experts[row * n_embd + col] * scale) * weights[row] * 1.0001f;|' \
                /tmp/ggml-planted-fuse/ggml/src/ggml-cuda/moe-weighted-reduction.cu
            grep -c 'weights\[row\] \* 1.0001f' /tmp/ggml-planted-fuse/ggml/src/ggml-cuda/moe-weighted-reduction.cu \
                > "$logdir/ggml-planted-fuse.txt"
            if ggml_part first; then
                # issue 35 item 4: the first complete ggml table, every family's build plus parity from an empty
                # cache (its seconds are the status line's; goal 5 minutes): compile --ggml builds every program on
                # every core (mul_mat_q is one nvcc run per format), then parity finds them all built; the later
                # parts reuse them (parity alone builds in parallel too, before its loop: gpu/loop.py)
                rm -rf "$STRATA_CACHE_DIR"
                step ggml-first-table bash -c "python3 -m strata_bench compile --ggml '$tree' \
                    && python3 -m strata_bench parity -q --ggml '$tree' -o md"
            fi
            if ggml_part core; then
                step ggml-compile sb compile --ggml "$tree" --family mmvq,dequant,q8_1,fp16deq,grouped --resources
                step ggml-parity sb parity -q --ggml "$tree" --family mmvq,dequant,q8_1,fp16deq,grouped -o md
                step ggml-b-same sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-same --family mmvq,dequant,q8_1 \
                    --format iq2_xxs,iq1_s,q4_k,q8_0 -o md
                step ggml-b-same-issue35 sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-same --family fp16deq,grouped -o md
                step ggml-b-planted sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-planted --family mmvq --format iq2_xxs,q4_k
                step ggml-b-planted-moe sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-planted-moe --family grouped \
                    --format iq2_xxs,iq4_xs
            fi
            if ggml_part fuse; then
                # the fusion families (issue 35): ggml's SwiGLU + quantize_q8_1 and its MoE combine chain (weighted
                # reduction, add, DSV4 residual post/pre, rms_norm*mul, cast): build, parity, an unchanged copy passes,
                # the planted reduction is caught (exit 1)
                step ggml-fuse-compile sb compile --ggml "$tree" --family swiglu_q8,moe_combine --resources
                step ggml-fuse-parity sb parity -q --ggml "$tree" --family swiglu_q8,moe_combine -o md
                step ggml-fuse-b-same sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-same --family swiglu_q8,moe_combine -o md
                step ggml-fuse-b-planted sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-planted-fuse --family moe_combine
            fi
            if ggml_part mmq; then
                # mul_mat_q (family mmq, issue 35's prompt GEMM): build, parity, an unchanged copy passes and the planted
                # dot is caught, bench
                step ggml-mmq-compile sb compile --ggml "$tree" --family mmq --resources
                step ggml-mmq-parity sb parity -q --ggml "$tree" --family mmq -o md
                step ggml-mmq-b-same sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-same --family mmq \
                    --format q8_0,iq4_xs,q4_k,q2_k -o md
                step ggml-mmq-b-planted sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-planted-mmq --family mmq \
                    --format q8_0,iq4_xs
                # the min term's change: every q4_1, q4_k and iq1_s case (exit 1)
                step ggml-mmq-b-planted-min sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-planted-mmq --family mmq \
                    --format q4_1,q4_k,iq1_s
                step ggml-mmq-bench sb bench -q --ggml "$tree" --family mmq --budget 0.5 -o md
            fi
            if ggml_part pfgemm; then
                # pfgemm's variant ggml (issue 35: mul_mat_q with expert ids, mmid.cu): parity, an unchanged copy passes,
                # and a one-line change in iq2_s's mul_mat_q dot (vec_dot_q8_0_16_q8_1_mma's NVIDIA MMA path: one unit
                # more in each first 16-value half) is caught: exit 1 expected, every iq2_s case failing, no iq4_nl one
                rm -rf /tmp/ggml-planted-pfgemm && cp -r "$tree" /tmp/ggml-planted-pfgemm
                sed -i 's|+= dB\[l%2\]\*(C\[0\]\.x\[l\]\*dA|+= dB[l%2]*((C[0].x[l] + 1)*dA|' \
                    /tmp/ggml-planted-pfgemm/ggml/src/ggml-cuda/mmq-vec-dot.cuh
                grep -c '((C\[0\]\.x\[l\] + 1)\*dA' /tmp/ggml-planted-pfgemm/ggml/src/ggml-cuda/mmq-vec-dot.cuh \
                    > "$logdir/ggml-planted-pfgemm.txt"
                step ggml-pfgemm-parity sb parity -q --ggml "$tree" --family pfgemm -o md
                step ggml-pfgemm-b-same sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-same --family pfgemm --format iq2_s,iq4_nl -o md
                step ggml-pfgemm-b-planted sb parity -q --ggml "$tree" --ggml-b /tmp/ggml-planted-pfgemm --family pfgemm \
                    --format iq2_s,iq4_nl
            fi
            if ggml_part bench; then
                step ggml-bench sb bench -q --ggml "$tree" --family mmvq --shape 131072x8192 --cols 1,8 --budget 0.5 -o md
                step ggml-bench-issue35 sb bench -q --ggml "$tree" --family fp16deq,grouped --format q8_0,iq4_xs,iq2_xxs,iq3_s \
                    --budget 0.5 -o md
                step ggml-bench-fusions sb bench -q --ggml "$tree" --family pfgemm,swiglu_q8,moe_combine --budget 0.5 -o md
            fi
            ;;
        lanepair)  # issue 37: new's 8-column iq1_s and iq2_xxs passes on the tensor cores with the lane-pair decode
            # (131072 rows and more): parity of every built-in case of both (the tall ones run it) and of the
            # experiment's (pair, the control, new-dp4a), then 131072x8192 at 8 columns for both: new beside
            # new-dp4a (new before the change), the candidates and old
            step lanepair-parity sb parity -q --family mmvq --format iq1_s,iq2_xxs
            step lanepair-parity-exp sb parity -q --cases experiments/mmvq_lanepair/cases.py --family mmvq_lanepair
            step lanepair-bench sb bench -q --cases experiments/mmvq_lanepair/cases.py --family mmvq_lanepair \
                --budget 0.5 --results results/tune -o md ;;
        onecol)  # issue 37 item 3: experiments/mmvq_onecol's one-column iq2_xxs and iq1_s kernels (fewer instructions a
            # weight; onecol-m's are new's tall one-column passes now): parity of every built-in case of both formats
            # (the tall one-column ones run mmvq_onecol) and of every candidate on all the experiment's cases (bitwise
            # against old), then 131072x8192 at one column for both formats: old, new, new-mmvq_new (new before the
            # move) and the candidates
            step onecol-parity-new sb parity -q --family mmvq --format iq1_s,iq2_xxs
            step onecol-parity sb parity -q --cases experiments/mmvq_onecol/cases.py --family mmvq_onecol
            step onecol-bench sb bench -q --cases experiments/mmvq_onecol/cases.py --family mmvq_onecol \
                --budget 0.5 --results results/tune -o md ;;
        onecol3)  # issue 37 item 3: experiments/mmvq_onecol3's one-column iq3_xxs with mul7's sign decode (docs/PERF_NOTES.md
            # v15): parity of every candidate on all the experiment's cases (bitwise against old), then 131072x8192 at
            # one column: old, new and the candidates
            step onecol3-parity sb parity -q --cases experiments/mmvq_onecol3/cases.py --family mmvq_onecol3
            step onecol3-bench sb bench -q --cases experiments/mmvq_onecol3/cases.py --family mmvq_onecol3 \
                --budget 0.5 --results results/tune -o md ;;
        onecol1m)  # issue 37: experiments/mmvq_onecol1m's one-column iq1_m on mmvq_onecol with a selector table (the
            # delta bit in the index; its README has the prediction): parity of every candidate on all the experiment's
            # cases (bitwise against old), then 131072x8192 at one column: old, new and the candidates
            step onecol1m-parity sb parity -q --cases experiments/mmvq_onecol1m/cases.py --family mmvq_onecol1m
            step onecol1m-bench sb bench -q --cases experiments/mmvq_onecol1m/cases.py --family mmvq_onecol1m \
                --budget 0.5 --results results/tune -o md ;;
        mma5)  # issue 37 item 1: the 8-column mma passes of the five other 1-3-bit formats (two k16 mmas a chunk for
            # the scale-per-16 ones; `new`'s on 32768 rows and more since the promotion): parity of every built-in case
            # of the five (the tall ones run it) and of every candidate on all the experiment's cases (bitwise against
            # old), then 131072x8192 and 32768x8192 at 8 columns for all five: new beside new-dp4a (new before the
            # change), the candidates and old
            step mma5-parity-product sb parity -q --family mmvq --format iq1_m,iq2_xs,iq2_s,iq3_xxs,iq3_s
            step mma5-parity sb parity -q --cases experiments/mmvq_mma5/cases.py --family mmvq_mma5
            step mma5-bench sb bench -q --cases experiments/mmvq_mma5/cases.py --family mmvq_mma5 \
                --budget 0.5 --results results/tune -o md ;;
        speed)  # issue 28's candidates (experiments/<name>/, family <name>): resources, bitwise parity against old, bench
            for x in ${STRATA_SPEED_EXPERIMENTS:-mmvq_coal mmvq_lanepair}; do  # grouped_sched: now grouped's new
                cases="experiments/$x/cases.py"
                step "speed-$x-resources" sb compile --arch 90 --cases "$cases" --family "$x" --resources
                step "speed-$x-parity" sb parity -q --cases "$cases" --family "$x"
                step "speed-$x-bench" sb bench -q --cases "$cases" --family "$x" --budget 0.3 --results results/tune -o md
            done ;;
        ncu-rows)  # issue 37 item 4 on real captures: the profile columns of new's mat-vec kernel (kernels/ncu.py:
            # thread-instructions per weight, DRAM bytes against bench's model, issue and DRAM %, the bound), the CSV
            # kept under results/ncu/; a row without a profile says why (exit 1)
            for spec in "iq1_s 1" "iq2_xxs 1" "iq3_xxs 1" "iq1_s 8" "iq2_xxs 8"; do
                set -- $spec
                step "ncu-row-$1-n$2" python3 -m strata_bench.kernels.ncu --format "$1" --shape 131072x8192 --cols "$2" \
                    --out "results/ncu/ncu-$1-n$2.csv"
            done ;;
        profile-rows)  # issue 37's targets the peer run's one-column profile does not cover: what binds new's 8-column
            # pass of each 1-3-bit format (kernels/ncu.py's columns, the CSV under results/ncu/), q2warp at one column
            # and the grouped experts at 8 entries an expert (bench --profile: every row of the case)
            for f in iq1_s iq1_m iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s; do
                step "ncu-row-$f-n8" python3 -m strata_bench.kernels.ncu --format "$f" --shape 131072x8192 --cols 8 \
                    --out "results/ncu/ncu-$f-n8.csv"
            done
            step profile-q2warp sb bench -q --profile --family q2warp --shape 131072x8192 --cols 1 --budget 0.2 -o md
            step profile-grouped sb bench -q --profile --family grouped -k 'groups=8-8-8-8-8-8-8-8' --budget 0.2 -o md ;;
        engine|engine-build|engine-ab)  # issue 36: two CUDA builds of a carried llama.cpp tree and a real model, the four A/Bs
            engine_step "$s" ;;
        ncu)  # stall reasons and occupancy of the 1-column kernels furthest from their targets (PEER.md method)
            for f in iq3_xxs iq3_s; do
                step "ncu-$f" ncu --clock-control none -k regex:mmvq_new -c 1 --set full \
                    python3 -m strata_bench bench -q --family mmvq --format $f --shape 131072x8192 --cols 1 --budget 0.05 \
                    --results /tmp/ncu-results
            done ;;
        ncu-mma)  # stall reasons of the tensor-core 8-column pass (mmvq_mma) at the DRAM shape: what binds it
            for f in iq4_nl iq4_xs; do
                step "ncu-mma-$f" ncu --clock-control none -k regex:mmvq_mma -c 1 --set full \
                    python3 -m strata_bench bench -q --family mmvq --format $f --shape 131072x8192 --cols 8 --budget 0.05 \
                    --results /tmp/ncu-results
            done ;;
        ncu-source)  # the same kernels' stall samples per SASS instruction (CSV): which load each warp waits on
            for f in iq3_xxs iq2_xxs; do
                step "ncu-source-$f" ncu --clock-control none -k regex:mmvq_new -c 1 --set full --page source \
                    --print-source sass --csv \
                    python3 -m strata_bench bench -q --family mmvq --format $f --shape 131072x8192 --cols 1 --budget 0.05 \
                    --results /tmp/ncu-results
            done ;;
        *) echo "unknown step $s" | tee -a "$logdir/status.txt" ;;
    esac
done
# Keep what every step printed beside the results it wrote.
logs="results/logs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$logs" && cp "$logdir"/*.log "$logdir/status.txt" "$logs"/
cp "$logdir"/*.json "$logdir"/*.json.gz "$logs"/ 2>/dev/null  # the carried engines' records, the base tree's bench
for f in /tmp/digests-base.json /tmp/digests-new.json; do  # every output's sha256, as tab-separated text
    # only this run's (a warm machine keeps an earlier run's files in /tmp)
    [ -f "$f" ] && [ "$f" -nt "$logdir" ] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('# output sha256 per case|variant|output; tree', d['tree'], 'parity exit', d['status']); [print(k+'\t'+v) for k,v in sorted(d['digests'].items())]" "$f" > "$logs/$(basename "$f" .json).tsv"
done
tar czf "$out/results.tgz" results
cat "$logdir/status.txt"
