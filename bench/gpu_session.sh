#!/usr/bin/env bash
# One GPU session in one command: the gpu-marked tests, the rest of the suite on the
# compiled-kernels backend, the GPU benchmark, one summary, inside 10 minutes.
#
# On the machine that has no GPU, once (astjax's own small dependencies travel as
# wheels; the device image has CuPy, JAX, pytest and pytest-xdist already):
#
#     echo /.whl/ >> .git/info/exclude
#     bash bench/gpu_session.sh --wheels          # pip download gast, beniget -> .whl/
#
# then, with the device tool: run(command="bash bench/gpu_session.sh", carry=[".whl"]).
# Installs nothing beyond .whl/*.whl (into /tmp/site).  Logs go to $OUT (the files
# that come back) or /tmp/astjax-gpu; the summary is the last lines printed.
# Budget (seconds, env): GPU_TESTS_S=180  SUITE_S=270 (0 skips it)  and the bench gets what is left
# of TOTAL_S=570 (with --quick sizes below 150 s); BENCH_ONLY=mlp,wave300 picks its rows.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "${1:-}" = "--wheels" ]; then
    mkdir -p .whl
    for pkg in gast==0.7.0 beniget==0.5.0; do
        "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_28_x86_64 --platform \
            manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$pkg" || exit 1
    done
    ls -l .whl
    exit 0
fi

START=$(date +%s)
TOTAL_S=${TOTAL_S:-570}
LOGS=${OUT:-/tmp/astjax-gpu}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false     # JAX would take 75% of the GPU's memory
if ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$(pwd)${PYTHONPATH:+:$PYTHONPATH}
else
    export PYTHONPATH=$(pwd)${PYTHONPATH:+:$PYTHONPATH}
fi
PARALLEL=""
if "$PY" -c "import xdist" 2>/dev/null; then
    PARALLEL="-n $(( $(nproc) > 12 ? 12 : $(nproc) ))"
fi
GPU_PARALLEL=""          # a few processes share the GPU: NVRTC compiles dominate
if "$PY" -c "import xdist" 2>/dev/null; then GPU_PARALLEL="-n 6"; fi
TIMEOUT_FLAG=""          # one hung test must not eat the session
if "$PY" -c "import pytest_timeout" 2>/dev/null; then TIMEOUT_FLAG="--timeout=120"; fi
"$PY" - <<'EOF' | tee "$LOGS/device.log"
import astjax, numpy
print("astjax", astjax.__file__, "numpy", numpy.__version__)
try:
    import cupy
    p = cupy.cuda.runtime.getDeviceProperties(0)
    print("cupy", cupy.__version__, "device", p["name"].decode(), "SMs",
          p["multiProcessorCount"])
except Exception as e:          # noqa: BLE001
    print("no GPU through CuPy:", e)
EOF

SUMMARY=()
phase() {   # name, seconds, command...
    local name=$1 limit=$2
    shift 2
    local t0=$(date +%s)
    timeout --signal=TERM --kill-after=10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
    local rc=$?
    local t1=$(date +%s)
    local last
    last=$(grep -E "passed|failed|error|skipped|no tests ran" "$LOGS/$name.log" | tail -1)
    [ $rc -eq 124 ] && last="TIMEOUT after ${limit}s; $last"
    SUMMARY+=("$(printf '%-10s rc=%-3s %4ss  %s' "$name" "$rc" "$((t1 - t0))" "$last")")
    tail -25 "$LOGS/$name.log"
}

phase gpu-tests "${GPU_TESTS_S:-180}" "$PY" -m pytest -q -m gpu -p no:cacheprovider \
    -rfE $GPU_PARALLEL $TIMEOUT_FLAG tests
if [ "${SUITE_S:-270}" -gt 0 ]; then       # SUITE_S=0 skips the CPU suite
    phase suite-c "${SUITE_S:-270}" env ASTJAX_BACKEND=c "$PY" -m pytest -q -m "not gpu" \
        -p no:cacheprovider -rfE $PARALLEL $TIMEOUT_FLAG tests
fi
LEFT=$(( TOTAL_S - ($(date +%s) - START) ))
QUICK=""
[ "$LEFT" -lt 150 ] && QUICK="--quick"
if [ "$LEFT" -gt 20 ]; then
    phase bench "$LEFT" "$PY" bench/gpu.py $QUICK ${BENCH_ONLY:+--only "$BENCH_ONLY"}
    SUMMARY+=("$(grep -c . "$LOGS/bench.log") lines of figures in bench.log $QUICK")
else
    SUMMARY+=("bench      skipped: ${LEFT}s left")
fi

echo
echo "==== astjax GPU session: $(date -u +%FT%TZ), $(( $(date +%s) - START ))s ===="
cat "$LOGS/device.log"
for line in "${SUMMARY[@]}"; do echo "$line"; done
echo "---- bench ----"
[ -f "$LOGS/bench.log" ] && grep -vE "^\s*$" "$LOGS/bench.log" | tail -30
