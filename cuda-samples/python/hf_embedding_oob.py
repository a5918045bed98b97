# EXPECT kernel=indexSelect error=CUDA_ERROR_ASSERT confidence=exact pysite=classify,BertEmbeddings.forward assert=indexSelect stdout=same
# REQUIRES: transformers
#
# hf_embedding_oob.py: third-party code, not written here: a Hugging Face
# transformers BERT classifier built from a small config (no weights, no
# network), fed a token id past the vocabulary.
#
# Timeline (default stream):
#   classify(model, ids)  BertEmbeddings.forward -> nn.Embedding -> index_select:
#                         indexSelect{Small,Large}Index with id 150 >= vocab 100:
#                         CUDA_KERNEL_ASSERT(srcIndex < srcSelectDimSize)  -> CULPRIT, 710
#                         (the rest of the forward pass is queued behind it)
#   logits.argmax(-1).tolist()                                             -> REPORTS
# The report must name the kernel (indexSelect...), the user's line
# (pysite=classify) and the module that did the lookup
# (BertEmbeddings.forward in the Python stack; pysite= takes a comma list,
# all must be present). The driver's assert line names indexSelectSmallIndex
# or indexSelectLargeIndex.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch
from transformers import BertConfig, BertForSequenceClassification


def build_model():
    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128, num_labels=3)
    torch.manual_seed(0)
    return BertForSequenceClassification(config).cuda().eval()


def classify(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def main():
    model = build_model()
    ids = torch.tensor([[1, 5, 17, 42, 2], [1, 7, 150, 9, 2]], device="cuda")  # BUG: 150 >= vocab 100
    logits = classify(model, ids)
    print("predictions:", logits.argmax(-1).tolist())


if __name__ == "__main__":
    main()
