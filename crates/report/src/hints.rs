//! One line of advice for well-known kernels: which input to check when a loss or an indexing
//! kernel asserts or reads out of bounds. A small data table, matched on the culprit's demangled
//! kernel name (substring) and the error; the first matching row wins.

/// `(kernel name substring, errors it applies to, advice)`.
const HINTS: &[(&str, &[&str], &str)] = &[
    (
        "nll_loss",
        &["CUDA_ERROR_ASSERT"],
        "a loss kernel asserted: check the target's range against the number of classes \
         (0 <= target < C, or ignore_index) and that its dtype is int64 (long)",
    ),
    (
        "binary_cross_entropy",
        &["CUDA_ERROR_ASSERT"],
        "binary cross entropy asserted: its input must lie in [0, 1] (apply sigmoid first, or use \
         BCEWithLogitsLoss)",
    ),
    (
        "embedding",
        &["CUDA_ERROR_ASSERT", "CUDA_ERROR_ILLEGAL_ADDRESS"],
        "an embedding kernel failed: check its indices (the index tensor, in PyTorch) against the table size \
         (0 <= index < num_embeddings)",
    ),
    (
        "index",
        &["CUDA_ERROR_ASSERT", "CUDA_ERROR_ILLEGAL_ADDRESS"],
        "an indexing kernel failed: check its indices (the index tensor, in PyTorch) against the size of the indexed \
         dimension (-size <= index < size)",
    ),
    (
        "gather",
        &["CUDA_ERROR_ASSERT", "CUDA_ERROR_ILLEGAL_ADDRESS"],
        "a gather kernel failed: check its indices (the index tensor, in PyTorch) against the size of the gathered \
         dimension (0 <= index < size)",
    ),
    (
        "scatter",
        &["CUDA_ERROR_ASSERT", "CUDA_ERROR_ILLEGAL_ADDRESS"],
        "a scatter kernel failed: check its indices (the index tensor, in PyTorch) against the size of the target \
         dimension (0 <= index < size; negative indices are not allowed)",
    ),
    (
        "histogram",
        &["CUDA_ERROR_ASSERT", "CUDA_ERROR_ILLEGAL_ADDRESS"],
        "a histogram kernel failed: check that every bin index it computes is below the number of \
         bins, and that the bins buffer holds that many",
    ),
];

/// The advice for a culprit kernel named `kernel` that failed with `error`, if any.
pub fn hint(kernel: &str, error: &str) -> Option<&'static str> {
    let lower = kernel.to_ascii_lowercase();
    HINTS
        .iter()
        .find(|(k, errors, _)| lower.contains(k) && errors.contains(&error))
        .map(|(_, _, advice)| *advice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_kernels_get_their_advice() {
        let nll = "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*)";
        assert!(hint(nll, "CUDA_ERROR_ASSERT")
            .unwrap()
            .contains("number of classes"));
        let idx = "void at::native::index_elementwise_kernel<128, 4>(long)";
        assert!(hint(idx, "CUDA_ERROR_ASSERT")
            .unwrap()
            .contains("indexed dimension"));
        let emb = "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, float, long>(long const*)";
        assert!(hint(emb, "CUDA_ERROR_ASSERT")
            .unwrap()
            .contains("num_embeddings"));
        assert!(
            hint("scatter_gather_elementwise_kernel", "CUDA_ERROR_ASSERT")
                .unwrap()
                .contains("gather")
        );
        // PyTorch's torch.histc kernel, and the demo's histogram_oob.
        assert!(hint("kernelHistogram1D", "CUDA_ERROR_ILLEGAL_ADDRESS")
            .unwrap()
            .contains("number of bins"));
    }

    #[test]
    fn other_kernels_and_errors_get_none() {
        assert_eq!(
            hint("oob_write(int*, int)", "CUDA_ERROR_ILLEGAL_ADDRESS"),
            None
        );
        assert_eq!(
            hint("nll_loss_forward", "CUDA_ERROR_MISALIGNED_ADDRESS"),
            None
        );
    }
}
