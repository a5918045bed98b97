#!/usr/bin/env bash
# GPU proof of the pip package (issue 12): on the GPU machine (no network, no Rust; python3 with
# torch installed system-wide), installs the prebuilt wheel from .gpu/ into a fresh venv and runs
# a PyTorch fault script with the installed command. Prints the text report and checks the JSON:
# the culprit is the nll_loss kernel, launched from the script's compute_loss line. Then the
# built-in demo on the GPU from the same venv. Last line: "N passed, M failed".
#
# Build the wheel on the development machine (Rust, network for maturin from PyPI), from the
# repository root:
#     rm -f .gpu/cudablame-*.whl && python3 -m pip wheel . --no-deps -w .gpu/ \
#         --config-settings=build-args="--compatibility manylinux_2_34"
# It is tagged py3-none-manylinux_2_34_x86_64 (maturin checks the command's glibc symbol versions
# against that policy; the embedded libraries built on glibc 2.36 need at most GLIBC_2.34 too), so
# it installs on any Python >= 3.8 with glibc >= 2.34 (the GPU machine: Python 3.12, glibc 2.39).
# Nothing in it links libpython. The lead carries .gpu/ to the GPU machine (.gpu is git-ignored).
# libcudablame.so and the simulated driver are embedded in the command (build.rs) and written on
# first use to $XDG_CACHE_HOME/cudablame/<version>-<hash>/ (default ~/.cache).
#
# Run on the GPU machine, from the repository root, with the wheel in .gpu/:
#     scripts/gpu-wheel.sh
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
wheel=$(ls -t .gpu/cudablame-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "no .gpu/cudablame-*.whl: build it first (see the top of $0)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
bad() { echo "FAILED $1"; failed=$((failed + 1)); }

venv="$work/venv"
# pip inside the venv needs ensurepip (python3.12-venv on Ubuntu); without it, the system's pip
# installs into the venv (--python); without any pip, the wheel (a zip) is unpacked the way pip
# would: the command into bin/, the package into site-packages.
unpack_wheel() {
    "$venv/bin/python" - "$wheel" "$venv" <<'PY'
import os, stat, sys, sysconfig, zipfile
wheel, venv = sys.argv[1], sys.argv[2]
site = sysconfig.get_path("purelib")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if ".data/scripts/" in name:
            dest = os.path.join(venv, "bin", os.path.basename(name))
        elif name.startswith("cudablame/"):
            dest = os.path.join(site, name)
        else:
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(z.read(name))
        if ".data/scripts/" in name:
            os.chmod(dest, os.stat(dest).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PY
}
how=
if python3 -m venv --system-site-packages "$venv" 2>/dev/null &&
    "$venv/bin/pip" install --no-index --quiet "$wheel"; then
    how="pip in the venv"
elif rm -rf "$venv" && python3 -m venv --without-pip --system-site-packages "$venv" &&
    python3 -m pip --python "$venv/bin/python" install --no-index --quiet "$wheel" 2>/dev/null; then
    how="the system's pip --python"
elif [ -x "$venv/bin/python" ] && unpack_wheel; then
    how="unpacking the wheel (no pip)"
fi
if [ -n "$how" ] && [ -x "$venv/bin/cudablame" ]; then
    ok "wheel $(basename "$wheel") installed into a venv by $how ($("$venv/bin/python" --version))"
else
    bad "wheel install"
    echo "0 passed, 1 failed"
    exit 1
fi
# torch may live outside the system site-packages that --system-site-packages adds (a user or
# another prefix's site, as on the GPU machine): make the venv see the directory it is in.
torch_site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
if [ -n "$torch_site" ] && ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    "$venv/bin/python" -c 'import site, sys; print(site.getsitepackages()[0])' |
        { read -r sp && echo "$torch_site" >"$sp/_outside_torch.pth"; }
    echo "torch from $torch_site (added to the venv with a .pth file)"
fi
export PATH="$venv/bin:$PATH"
echo "command: $(command -v cudablame) ($(cudablame --version))"

# The PyTorch fault: a target index out of range in cross_entropy (device-side assert).
report="$work/reports/cross_entropy_oob.json"
cudablame run --report "$report" -- python3 cuda-samples/python/cross_entropy_oob.py 2>"$work/stderr"
echo "program exit status: $? (the CUDA error's, as without cudablame)"
echo "---- stderr of the program (the text report) ----"
cat "$work/stderr"
echo "---- end of stderr ----"
if [ -f "$report" ] && python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
op = r["culprit"]["op"]
kernel = op["kernel"] or ""
lines = [(f["function"], f["file"], f["line"]) for f in op.get("python_stack", [])]
print("error:", r["error"]["name"], "| culprit:", kernel[:120], "| confidence:", r["culprit"]["confidence"])
print("python frames:", lines[:4])
print("hint:", r["culprit"].get("hint"))
assert "nll_loss" in kernel, kernel
assert any(fn == "compute_loss" and file.endswith("cross_entropy_oob.py") for fn, file, _ in lines), lines
PY
then
    ok "JSON names the nll_loss kernel launched from compute_loss"
else
    bad "JSON names the nll_loss kernel launched from compute_loss"
fi
if grep -q "^culprit:  nll_loss_forward_reduce_cuda_kernel_2d" "$work/stderr" &&
    grep -q "^launched: compute_loss at .*cross_entropy_oob.py:" "$work/stderr"; then
    ok "text report leads with the kernel and the launching line"
else
    bad "text report leads with the kernel and the launching line"
fi
if cudablame show --verbose "$report" >"$work/verbose" && grep -q "nll_loss" "$work/verbose"; then
    ok "cudablame show --verbose"
else
    bad "cudablame show --verbose"
fi

# The built-in demo on the GPU, from the venv (python -m: the package's entry point).
if python3 -m cudablame demo --report-dir "$work/demo" 2>&1 | tee "$work/demo.log" | tail -3 &&
    grep -q "on the GPU" "$work/demo.log" && grep -q "names histogram_oob (exact)" "$work/demo.log"; then
    ok "python -m cudablame demo on the GPU"
else
    bad "python -m cudablame demo on the GPU"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
