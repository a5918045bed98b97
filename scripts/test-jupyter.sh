#!/usr/bin/env bash
# A real Jupyter kernel under cudablame on the simulated driver (issue 23; called by .ci/run):
#   1. jupyter_client and ipykernel from PyPI into a virtual environment (target/jupyter-venv,
#      kept between runs);
#   2. `cudablame jupyter install --python <venv python> --prefix <tmp>` writes the kernelspec;
#   3. jupyter_client starts that kernel (the simulated driver on LD_LIBRARY_PATH as
#      libcuda.so.1) and executes one cell that launches a faulting kernel through the driver API
#      with ctypes, synchronizes, and raises with cuGetErrorString's text, as PyTorch does;
#   4. the cell's error output must name the culprit kernel and the cell line that launched it,
#      and the report file named there must exist; `cudablame jupyter uninstall` removes the spec.
# Skips (exit 0, "SKIP" line) only when pip cannot reach PyPI. Needs
# `cargo build --release --workspace` first. Last line: "N passed, M failed".
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
release="$root/target/release"
for f in cudablame libcudablame.so libfakecuda.so; do
    [ -f "$release/$f" ] || { echo "$release/$f missing: run cargo build --release --workspace" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
bad() { echo "FAILED $1"; [ -f "${2:-/dev/null}" ] && sed 's/^/    /' "$2" | tail -60; failed=$((failed + 1)); }

venv="$root/target/jupyter-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" || { echo "cannot create a venv" >&2; exit 1; }
if ! "$venv/bin/python" -c 'import jupyter_client, ipykernel' 2>/dev/null; then
    if ! "$venv/bin/python" -m pip install -q jupyter_client ipykernel >"$work/pip.log" 2>&1; then
        if grep -qiE 'NewConnectionError|Temporary failure in name resolution|Network is unreachable|Connection refused|ConnectTimeout|Max retries exceeded|No matching distribution found' "$work/pip.log"; then
            echo "SKIP jupyter: pip cannot reach PyPI to install jupyter_client and ipykernel:"
            tail -3 "$work/pip.log" | sed 's/^/    /'
            echo "0 passed, 0 failed"
            exit 0
        fi
        bad "pip install jupyter_client ipykernel" "$work/pip.log"
        echo "$passed passed, $failed failed"
        exit 1
    fi
fi

mkdir -p "$work/driver" "$work/prefix" "$work/reports" "$work/home"
cp "$release/libfakecuda.so" "$work/driver/libcuda.so.1"
export HOME="$work/home"
if "$release/cudablame" jupyter install --python "$venv/bin/python" --prefix "$work/prefix" \
    --name cb-test --report "$work/reports/cb-%p.json" >"$work/install.log" 2>&1 &&
    grep -q '"LD_PRELOAD": "'"$release"'/libcudablame.so"' "$work/prefix/share/jupyter/kernels/cb-test/kernel.json" &&
    grep -q '"'"$venv"'/bin/python' "$work/prefix/share/jupyter/kernels/cb-test/kernel.json"; then
    ok "jupyter install writes the kernelspec"
else
    cat "$work/prefix/share/jupyter/kernels/cb-test/kernel.json" >>"$work/install.log" 2>/dev/null
    bad "jupyter install writes the kernelspec" "$work/install.log"
fi

# The cell: a faulting launch through the driver API, the error raised with cuGetErrorString's
# text (what PyTorch does with cudaGetErrorString).
cat >"$work/cell.py" <<'PY'
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
cuda.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
cuda.cuGetErrorString.argtypes = [ctypes.c_uint, ctypes.POINTER(ctypes.c_char_p)]
dev, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cuda.cuCtxSetCurrent(ctx) == 0
assert cuda.cuModuleLoadData(ctypes.byref(mod), b"// fake: gather_rows fault=700 delay_us=20000\n") == 0
assert cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"gather_rows") == 0
print(f"cell_file={sys._getframe().f_code.co_filename} launch_line={sys._getframe().f_lineno + 1}")
assert cuda.cuLaunchKernel(fn, 8, 1, 1, 256, 1, 1, 0, None, None, None) == 0
rc = cuda.cuCtxSynchronize()
text = ctypes.c_char_p()
assert cuda.cuGetErrorString(rc, ctypes.byref(text)) == 0
raise RuntimeError(f"CUDA error: {text.value.decode()}")
PY

cat >"$work/run_cell.py" <<'PY'
import json, os, re, sys
from jupyter_client.manager import start_new_kernel
cell = open(sys.argv[1]).read()
km, kc = start_new_kernel(kernel_name="cb-test", startup_timeout=120)
outputs = []
try:
    reply = kc.execute_interactive(cell, timeout=120, output_hook=lambda m: outputs.append(m))
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
stream = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
errors = [m["content"] for m in outputs if m["msg_type"] == "error"]
print("stream:", stream)
print("errors:", json.dumps(errors, indent=1))
assert reply["content"]["status"] == "error", reply["content"]
assert errors, "the cell raised no error output"
m = re.search(r"cell_file=(\S+) launch_line=(\d+)", stream)
assert m, stream
cell_file, line = m.group(1), int(m.group(2))
evalue = errors[0]["evalue"]
shown = "\n".join(errors[0]["traceback"])
report = re.search(r"; report (\S+)\]", evalue)
expected = (f"CUDA error: an illegal memory access was encountered [cudablame: culprit gather_rows, "
            f"launched at {os.path.basename(cell_file)}:{line} (exact); report ")
assert evalue.startswith(expected), (evalue, expected)
assert "gather_rows" in re.sub(r"\x1b\[[0-9;]*m", "", shown), shown
assert report and os.path.isfile(report.group(1)), evalue
r = json.load(open(report.group(1)))
assert r["culprit"]["op"]["kernel"] == "gather_rows", r["culprit"]
assert line in [f["line"] for f in r["culprit"]["op"]["python_stack"]], r["culprit"]["op"]["python_stack"]
print("cell error:", evalue)
PY

if JUPYTER_PATH="$work/prefix/share/jupyter" LD_LIBRARY_PATH="$work/driver" \
    timeout 300 "$venv/bin/python" "$work/run_cell.py" "$work/cell.py" >"$work/cell.log" 2>&1; then
    ok "a faulting cell's error names the culprit and its cell line"
    grep '^cell error:' "$work/cell.log" | sed 's/^/    /'
else
    bad "a faulting cell's error names the culprit and its cell line" "$work/cell.log"
fi

if "$release/cudablame" jupyter uninstall --prefix "$work/prefix" --name cb-test >"$work/uninstall.log" 2>&1 &&
    [ ! -e "$work/prefix/share/jupyter/kernels/cb-test" ]; then
    ok "jupyter uninstall removes the kernelspec"
else
    bad "jupyter uninstall removes the kernelspec" "$work/uninstall.log"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
