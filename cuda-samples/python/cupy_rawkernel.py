# EXPECT kernel=scatter_rows error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact|oneof reporter=cuCtxSynchronize pysite=copy_rows
# EXPECT-EVERY confidence=exact
# Default (budgeted) markers: exact when the culprit launch got a marker or
# was the last op before the reporting call, else "one of these N ops" with
# the culprit among them: timing decides.
# REQUIRES: cupy
#
# cupy_rawkernel.py: a CuPy RawKernel (CUDA C++ compiled at run time with
# NVRTC, loaded by CuPy through the driver API, launched with
# cuLaunchKernel; no PyTorch involved) writes through a NULL row pointer.
#
# scatter_rows copies row r of src into rows[r], a table of device
# pointers. The table has three entries but only two were filled in: the
# third is 0, so block 2 stores to addresses 0..124, which are never mapped
# -> 700 (cudaErrorIllegalAddress, sticky).
#
# Timeline (CuPy's default stream: the legacy default stream):
#   cupy.zeros / cupy.arange          -> good
#   copy_rows(...)  scatter_rows      -> CULPRIT, 700
#   cupy.cuda.Device().synchronize()  -> REPORTS (cudaDeviceSynchronize:
#                                        cuCtxSynchronize_v2)
#
# The kernel name is the one CuPy looks the function up by
# (cuModuleGetFunction / cuLibraryGetKernel: "scatter_rows", extern "C").
# The launch comes from copy_rows (pysite=: RawKernel.__call__ is Cython, so
# copy_rows is the innermost Python frame).
#
# REQUIRES: gpu-check.sh skips the case when cupy is not importable.
#
# Expected: uncaught cupy_backends.cuda.api.runtime.CUDARuntimeError
# "cudaErrorIllegalAddress: an illegal memory access was encountered", exit
# status 1.
import cupy
import numpy as np

SCATTER_ROWS = cupy.RawKernel(
    r"""
extern "C" __global__
void scatter_rows(float* const* rows, const float* src, int ncols) {
    int r = blockIdx.x, c = threadIdx.x;
    if (c < ncols) rows[r][c] = src[r * ncols + c];
}
""",
    "scatter_rows",
)


def copy_rows(rows, src, ncols):
    SCATTER_ROWS((rows.size,), (32,), (rows, src, np.int32(ncols)))


def main():
    ncols = 32
    a = cupy.zeros(ncols, dtype=cupy.float32)
    b = cupy.zeros(ncols, dtype=cupy.float32)
    src = cupy.arange(3 * ncols, dtype=cupy.float32)
    # BUG: the third destination row was never allocated; its pointer is 0.
    rows = cupy.array([a.data.ptr, b.data.ptr, 0], dtype=cupy.uint64)
    cupy.cuda.Device().synchronize()

    copy_rows(rows, src, ncols)
    cupy.cuda.Device().synchronize()  # the illegal address surfaces here
    print("sum:", float(a.sum() + b.sum()))


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
