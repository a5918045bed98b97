# EXPECT kernel=scatter_rows error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact pysite=copy_rows
# REQUIRES: cupy
#
# errstr_cupy.py: the culprit in the exception CuPy raises (issue 23). CuPy builds
# CUDARuntimeError's message from cudaGetErrorName and cudaGetErrorString of the runtime its
# extension modules link (cupy_backends.cuda.api.runtime); whether that reference binds
# cudablame's export (shared runtime) is what this case shows. Also run by scripts/gpu-errstr.sh.
#
# The kernel (as cupy_rawkernel.py) writes through a NULL row pointer -> 700. Prints
#   errstr-launch-line: N, errstr-type: ..., errstr-str: <repr(str(e))>
#
# Expected: exit 0 (the exception is caught).
import cupy
import numpy as np

SOURCE = r"""
extern "C" __global__ void scatter_rows(const float* src, float** rows, int width) {
    int r = blockIdx.x, c = threadIdx.x;
    if (c < width) rows[r][c] = src[r * width + c];
}
"""


def line_of(marker):
    for n, text in enumerate(open(__file__), 1):
        if text.rstrip().endswith("# @" + marker):
            return n
    return 0


def copy_rows(kernel, src, table, width):
    kernel((3,), (32,), (src, table, np.int32(width)))  # @launch


def main():
    print(f"errstr-launch-line: {line_of('launch')}", flush=True)
    kernel = cupy.RawKernel(SOURCE, "scatter_rows")
    width = 32
    src = cupy.arange(3 * width, dtype=cupy.float32)
    a, b = cupy.zeros(width, cupy.float32), cupy.zeros(width, cupy.float32)
    table = cupy.array([a.data.ptr, b.data.ptr, 0], dtype=cupy.uint64)  # BUG: row 2 is NULL
    try:
        copy_rows(kernel, src, table, width)
        cupy.cuda.Device().synchronize()
        print("errstr-str: (no exception)")
    except Exception as e:
        print(f"errstr-type: {type(e).__name__}")
        print(f"errstr-str: {str(e)!r}", flush=True)


if __name__ == "__main__":
    main()
