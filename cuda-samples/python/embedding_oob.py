# EXPECT kernel=indexSelect error=CUDA_ERROR_ASSERT confidence=exact pysite=embed_tokens hint="check its indices (the index tensor, in PyTorch)"
#
# embedding_oob.py: nn.Embedding looked up with a token id equal to the
# vocabulary size.
#
# nn.Embedding.forward -> F.embedding -> at::embedding, which on CUDA is
# weight.index_select(0, ids): the index_select kernel
# (at::native::(anonymous namespace)::indexSelectSmallIndex / LargeIndex)
# has CUDA_KERNEL_ASSERT(srcIndex < srcSelectDimSize) -> 710
# (cudaErrorAssert, sticky). Nothing checks the ids on the host.
#
# The Python stack at the launch, innermost first: torch's F.embedding,
# Embedding.forward, Module._call_impl, Module._wrapped_call_impl (folded as
# torch frames in the text report), then embed_tokens (pysite=), at the
# emb(tokens) line.
#
# hint=: the culprit is an index_select kernel, so the report gives the
# indexing kernels' advice (the table's "embedding" row matches the
# embedding backward kernels only); the substring is common to both rows.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch

VOCAB = 100


def embed_tokens(emb, tokens):
    return emb(tokens)


def main():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(VOCAB, 32).cuda()
    # BUG: ids must be < VOCAB; the end-of-text id was appended as VOCAB.
    tokens = torch.tensor([[5, 17, 99, VOCAB]], device="cuda")
    h = embed_tokens(emb, tokens)
    print("norm:", h.norm().item())  # the device-side assert surfaces here at the latest


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
