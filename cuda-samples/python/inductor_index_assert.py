# EXPECT kernel=triton_ error=CUDA_ERROR_ASSERT confidence=exact|oneof pysite=main assert="index out of bounds" stdout=same among=triton_
# REQUIRES: triton
#
# exact|oneof: Triton's assert line names the function "unknown" (triton 3.6.0), so the assert
# cannot pick the kernel; whether a budget marker stands between the Triton kernel and the
# sum's reduce kernel right after it is timing (exact in the eighteenth session, "one of these 2
# ops" with the Triton kernel ranked first in the twenty-fourth, H100).
#
# inductor_index_assert.py: torch.compile'd indexing with an out-of-range
# index. Inductor generates a Triton kernel with a bounds check
# (tl.device_assert "index out of bounds: 0 <= tmpN < 100", kept by
# torch._inductor.config.assert_indirect_indexing, on by default); Triton
# compiles device asserts in with TRITON_DEBUG=1 (set below, before import).
# The failing assert makes the driver print the assert line on stdout from
# inside libcuda.so.1; cudablame captures it (stdout unchanged) and names the
# generated kernel (triton_poi_fused_..., kernel=triton_) exactly.
#
# Timeline (default stream):
#   lookup(table, idx)   compiled: the generated Triton kernel gathers rows,
#                        idx[1] == 150 >= 100                   -> CULPRIT, 710
#   out.sum().item()                                            -> REPORTS
# The launch comes from Inductor's generated `call` function, under main()
# (pysite=main: the compiled frame of lookup replaces lookup itself).
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import os

os.environ.setdefault("TRITON_DEBUG", "1")

import torch  # noqa: E402


@torch.compile
def lookup(table, idx):
    return table[idx] * 2.0


def main():
    table = torch.randn(100, 8, device="cuda")
    good = torch.tensor([3, 7, 42], device="cuda")
    print("ok:", lookup(table, good).sum().item() != 0)  # compile and run once
    idx = torch.tensor([3, 150, 42], device="cuda")  # BUG: 150 >= 100 rows
    out = lookup(table, idx)
    print("sum:", out.sum().item())  # the assert surfaces here


if __name__ == "__main__":
    main()
