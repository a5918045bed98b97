# EXPECT kernel=index error=CUDA_ERROR_ASSERT confidence=exact pysite=replay_step hint="an indexing kernel"
#
# cuda_graph_oob.py: a bad index inside a captured torch.cuda.CUDAGraph.
#
# The graph captures static_out = table[static_idx] (the element-wise index
# kernel). Captured graphs read their inputs from fixed ("static") tensors;
# each step copies the new batch into them and replays the graph. One batch
# carries an id equal to len(table): the index kernel asserts "index out of
# bounds" -> 710 (cudaErrorAssert, sticky) during replay().
#
# Timeline:
#   warm-up on a side stream, then capture (torch.cuda.graph, on its own
#   capture stream: the captured kernels do not run and are not ops)
#   static_idx.copy_(batch)          legacy stream, a device-to-device copy -> good
#   replay_step(g): g.replay()       cudaGraphLaunch on the legacy stream ->
#                                    CULPRIT op (kind "graph"), launched from
#                                    replay_step (pysite=)
#   torch.cuda.synchronize()         -> REPORTS (cuCtxSynchronize)
#
# The graph launch is the only unfinished op: exact. kernel=index REQUIRES
# GRAPH-KERNEL NAMING (see graph_capture.cu): cudablame names a graph launch
# by its captured kernels (op.kernel = "graph: ...index_elementwise_kernel...",
# being added); until then this case fails on the kernel= check (and on
# hint=, which cudablame derives from that name) only.
# pysite= is where the graph was replayed: the graph op's own Python stack.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch


def gather(table, idx):
    return table[idx]


def replay_step(g):
    g.replay()


def main():
    table = torch.arange(64, dtype=torch.float32, device="cuda")
    static_idx = torch.zeros(8, dtype=torch.long, device="cuda")

    # Warm up outside the graph (lazy kernel loading, allocator), as the
    # CUDA graphs docs recommend.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gather(table, static_idx)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = gather(table, static_idx)

    batch = torch.tensor([1, 2, 3, 64, 5, 6, 7, 8], device="cuda")  # BUG: 64 is out of range
    torch.cuda.synchronize()
    static_idx.copy_(batch)
    replay_step(g)
    torch.cuda.synchronize()  # the device-side assert surfaces here
    print("sum:", static_out.sum().item())


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
