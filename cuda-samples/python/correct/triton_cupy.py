"""triton_cupy.py: correct (non-faulting) Triton and CuPy kernels for scripts/gpu-differential.sh.

- triton_add: a @triton.jit vector add with a mask (n not a multiple of the block), launched by
  Triton (cuModuleLoadData, cuLaunchKernelEx through dlsym).
- cupy_rawkernel: a CuPy RawKernel (NVRTC, cuLaunchKernel), no PyTorch involved.
Each part prints `RESULT <part> <sha256>` of its output, or `RESULT <part> skipped` (and why, on
the line before) when its module is not importable.
"""
import os

# Must be set before torch (cuBLAS) initializes: deterministic cuBLAS workspaces.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import ctypes  # noqa: E402
import hashlib  # noqa: E402

import torch  # noqa: E402

N = 98_765          # not a multiple of BLOCK: the last program's tail is masked
BLOCK = 1024

try:
    import triton
    import triton.language as tl
    TRITON_MISSING = None
except Exception as e:  # noqa: BLE001
    TRITON_MISSING = f"{type(e).__name__}: {e}"

if TRITON_MISSING is None:
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


def digest(tensors):
    """sha256 over dtype, shape and raw bytes of each tensor (copied to the CPU), in order."""
    h = hashlib.sha256()
    for t in tensors:
        c = t.detach().cpu().contiguous()
        h.update(f"{c.dtype}{tuple(c.shape)};".encode())
        h.update(ctypes.string_at(c.data_ptr(), c.numel() * c.element_size()))
    return h.hexdigest()


def triton_part():
    if TRITON_MISSING is not None:
        print(f"triton_add skipped: triton not importable ({TRITON_MISSING})")
        print("RESULT triton_add skipped")
        return
    torch.manual_seed(0)
    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")
    out = torch.empty(N, device="cuda")
    add_kernel[(triton.cdiv(N, BLOCK),)](x, y, out, N, BLOCK=BLOCK)
    torch.cuda.synchronize()
    same = torch.equal(out, x + y)
    print(f"triton_add: {N} elements, equal to torch's x + y: {same}")
    print(f"RESULT triton_add {digest([out])}")


CUPY_SOURCE = r"""
extern "C" __global__
void saxpy(const float* x, const float* y, float* out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""


def cupy_part():
    try:
        import cupy
        import numpy as np
    except Exception as e:  # noqa: BLE001
        print(f"cupy_rawkernel skipped: cupy not importable ({type(e).__name__}: {e})")
        print("RESULT cupy_rawkernel skipped")
        return
    saxpy = cupy.RawKernel(CUPY_SOURCE, "saxpy")
    x = (cupy.arange(N, dtype=cupy.float32) / N).astype(cupy.float32)
    y = cupy.cos(cupy.arange(N, dtype=cupy.float32)).astype(cupy.float32)
    out = cupy.empty(N, dtype=cupy.float32)
    threads = 256
    saxpy(((N + threads - 1) // threads,), (threads,), (x, y, out, np.float32(2.5), np.int32(N)))
    cupy.cuda.Device().synchronize()
    host = cupy.asnumpy(out)
    h = hashlib.sha256()
    h.update(f"{host.dtype}{host.shape};".encode())
    h.update(host.tobytes())
    print(f"cupy_rawkernel: {N} elements, sum {float(host.sum(dtype=np.float64)):.6f}")
    print(f"RESULT cupy_rawkernel {h.hexdigest()}")


def main():
    torch.use_deterministic_algorithms(True)
    triton_part()
    cupy_part()


if __name__ == "__main__":
    main()
