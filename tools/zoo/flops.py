"""FLOPs per sample of a PyTorch model, counted with forward hooks.

Counts 2 x multiply-adds of Conv2d, Linear and nn.MultiheadAttention (its
input and output projections and the two attention products). Element-wise ops, pooling, normalisation and
softmax are not counted: they are a small share of the models in the zoo and
do not run on the FMA units the peak FLOP/s figure describes.
"""
import torch
from torch import nn


def count_flops(model, shape):
    """FLOPs of one forward pass on an input of `shape` divided by shape[0]."""
    total = [0]

    def conv_hook(m, inp, out):
        k = m.kernel_size[0] * m.kernel_size[1]
        total[0] += 2 * out.numel() * (m.in_channels // m.groups) * k

    def lin_hook(m, inp, out):
        total[0] += 2 * (out.numel() // m.out_features) * m.in_features \
            * m.out_features

    def mha_hook(m, inp, out):
        # torchvision passes query/key/value as keywords, which forward
        # hooks do not see: take the query length from the output and
        # assume self-attention (key length = query length).
        o = out[0] if isinstance(out, tuple) else out
        if m.batch_first:
            n, lq, e = o.shape
        else:
            lq, n, e = o.shape
        lk = lq
        total[0] += 2 * n * lq * e * e          # q projection
        total[0] += 2 * 2 * n * lk * e * e      # k, v projections
        total[0] += 2 * 2 * n * lq * lk * e     # q k^T and attn v
        total[0] += 2 * n * lq * e * e          # out_proj (used through its
        # weight by F.multi_head_attention_forward, so its hook never fires)

    hooks = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            hooks.append(m.register_forward_hook(lin_hook))
        elif isinstance(m, nn.MultiheadAttention):
            hooks.append(m.register_forward_hook(mha_hook))
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        model(torch.zeros(shape))
    model.train(was_training)
    for h in hooks:
        h.remove()
    return total[0] // shape[0]
