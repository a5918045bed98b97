# EXPECT kernel=nll_loss site=nll_loss error=CUDA_ERROR_ASSERT confidence=exact pysite=compute_loss hint="number of classes"
#
# repeated_site_oob.py: the culprit comes from a launch site that launched many times before.
#
# A training loop runs the same F.cross_entropy line for 30 steps with good targets (logging
# loss.item() each step, as training scripts do), then, at step 30, a target equal to the
# number of classes: nll_loss's CUDA kernel asserts (710, sticky) and loss.item() reports it.
#
# In a Python process cudablame copies the native stack once per launch site (the Python
# stack and the kernel: src/stack/sites.rs), at the site's first launch, and every later
# launch from it shares that copy. The culprit here is the site's 31st launch: its native
# frames are those of step 0's launch, which must still name nll_loss's ATen launcher
# (site=nll_loss: some culprit.op.stack function contains it). CUDABLAME_STACK=every copies
# each launch's own stack.
#
# Expected: uncaught exception, exit status 1.
import torch
import torch.nn.functional as F

NUM_CLASSES = 10


def compute_loss(logits, target):
    return F.cross_entropy(logits, target)


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(32, NUM_CLASSES).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 32, device="cuda")
    for step in range(31):
        target = torch.randint(0, NUM_CLASSES, (64,), device="cuda")
        if step == 30:
            target[5] = NUM_CLASSES
        loss = compute_loss(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
