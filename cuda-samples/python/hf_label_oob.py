# EXPECT kernel=nll_loss error=CUDA_ERROR_ASSERT confidence=exact pysite=train_step assert="n_classes" stdout=same
# REQUIRES: transformers
#
# hf_label_oob.py: third-party code, not written here: a Hugging Face
# transformers BERT classifier built from a small config (no weights, no
# network, num_labels=3), trained one step with a label past the number of
# classes.
#
# Timeline (default stream):
#   train_step(): model(input_ids, labels=labels) -> CrossEntropyLoss ->
#                 nll_loss_forward_reduce_cuda_kernel_2d with label 3 >= 3:
#                 assert `t >= 0 && t < n_classes` fails           -> CULPRIT, 710
#                 loss.backward() launches more work
#   loss.item()                                                    -> REPORTS (or a launch)
# The report must name nll_loss_forward_reduce_cuda_kernel_2d, the driver's
# assert line (assert=n_classes) and the user's line (pysite=train_step).
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch
from transformers import BertConfig, BertForSequenceClassification


def build_model():
    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128, num_labels=3)
    torch.manual_seed(0)
    return BertForSequenceClassification(config).cuda().train()


def train_step(model, opt, ids, labels):
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    opt.step()
    opt.zero_grad()
    return out.loss


def main():
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.tensor([[1, 5, 17, 42, 2], [1, 7, 33, 9, 2]], device="cuda")
    labels = torch.tensor([0, 3], device="cuda")  # BUG: num_labels is 3, labels must be < 3
    loss = train_step(model, opt, ids, labels)
    print("loss:", loss.item())


if __name__ == "__main__":
    main()
