"""Fashion-MNIST model family of Vario's zoo: the architectures only.

Imported by tools/zoo/train_fmnist.py (training + export) and by
bench/torch_bench.py (latency does not depend on weight values, so the
benchmark rebuilds the architecture without the trained weights).

Every model takes float32 pixels in [0, 1], shape [N, 1, 28, 28], and returns
logits [N, 10]. No input normalisation is needed: the models were trained on
[0, 1] pixels directly (the convolutional ones normalise with their first
BatchNorm). Only ops from Vario's engine list appear after export: Conv,
Gemm, Relu, MaxPool, GlobalAveragePool, BatchNormalization, Add, Flatten.
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flops  # noqa: E402  (tools/zoo/flops.py, beside this file)

# Ordered from smallest to largest (latency and accuracy grow together).
NAMES = ["fmnist_linear", "fmnist_mlp", "fmnist_cnn_s", "fmnist_cnn_bn",
         "fmnist_resnet"]


class FastLinear(nn.Linear):
    """nn.Linear that trains through a 1x1 convolution.

    Debian's python3-torch links the reference BLAS (BLAS_INFO=generic), so
    F.linear trains ~18x slower than the oneDNN 1x1 convolution computing the
    same product. In eval mode (and so in the ONNX export, a plain Gemm) it is
    an ordinary nn.Linear; the weights have nn.Linear's layout throughout."""

    def forward(self, x):
        if not self.training:
            return F.linear(x, self.weight, self.bias)
        n = x.shape[0]
        w = self.weight.view(self.out_features, self.in_features, 1, 1)
        return F.conv2d(x.reshape(n, self.in_features, 1, 1), w,
                        self.bias).view(n, self.out_features)


class Linear(nn.Module):
    """Multinomial logistic regression: Flatten -> Gemm."""

    def __init__(self):
        super().__init__()
        self.flat = nn.Flatten()
        self.fc = FastLinear(784, 10)

    def forward(self, x):
        return self.fc(self.flat(x))


class MLP(nn.Module):
    """Two hidden layers 512-256 with ReLU (dropout only in training)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            FastLinear(784, 512), nn.ReLU(), nn.Dropout(0.2),
            FastLinear(512, 256), nn.ReLU(), nn.Dropout(0.2),
            FastLinear(256, 10))

    def forward(self, x):
        return self.net(x)


class CNNSmall(nn.Module):
    """LeNet-like: two 3x3 conv + ReLU + 2x2 max-pool, then one Gemm."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            FastLinear(32 * 7 * 7, 10))

    def forward(self, x):
        return self.net(x)


def conv_bn(cin, cout, stride=1):
    return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU()]


class CNNBN(nn.Module):
    """Conv-BN-ReLU x2 with max-pooling, then a 128-wide hidden Gemm."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            *conv_bn(1, 32), nn.MaxPool2d(2),
            *conv_bn(32, 64), nn.MaxPool2d(2),
            nn.Flatten(),
            FastLinear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3),
            FastLinear(128, 10))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    """Basic residual block (ResNet v1): conv-bn-relu-conv-bn + shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        s = x if self.short is None else self.short(x)
        return self.relu(y + s)


class ResNet(nn.Module):
    """Small ResNet: stem at 28x28, residual stages 14x14 (32 ch),
    7x7 (64 ch), 4x4 (128 ch), global average pool, Gemm."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(*conv_bn(1, 32), nn.MaxPool2d(2))
        self.layers = nn.Sequential(
            Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()
        self.fc = FastLinear(128, 10)

    def forward(self, x):
        return self.fc(self.flat(self.pool(self.layers(self.stem(x)))))


def build(name):
    return {"fmnist_linear": Linear, "fmnist_mlp": MLP,
            "fmnist_cnn_s": CNNSmall, "fmnist_cnn_bn": CNNBN,
            "fmnist_resnet": ResNet}[name]()


def count_flops(model, shape=(1, 1, 28, 28)):
    """FLOPs per sample of Conv and Linear layers (2 x multiply-adds), as
    counted for the whole zoo by tools/zoo/flops.py."""
    return flops.count_flops(model, shape)
