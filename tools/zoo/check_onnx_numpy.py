#!/usr/bin/python3
"""Check the exported Fashion-MNIST ONNX files against their PyTorch
reference logits with a small, independent NumPy interpreter.

    /usr/bin/python3 tools/zoo/check_onnx_numpy.py [models/fmnist/NAME ...]

There is no ONNX Runtime on the development machine, so this is how the zoo
shows that each model.onnx computes what PyTorch computed: it runs the graph
node by node in float64 NumPy on models/fmnist-data/val_inputs.npy[:64] and
compares with models/fmnist-data/ref/<name>.npy (max error relative to the
largest |logit|, must be <= 1e-4). It implements only the ops the family
uses: Conv, Gemm, MatMul, Relu, MaxPool, AveragePool, GlobalAveragePool,
BatchNormalization, Add, Flatten, Reshape, Dropout, Clip, Identity.
"""
import glob
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def windows(x, kh, kw, sh, sw):
    """x [N,C,H,W] (already padded) -> [N,C,OH,OW,kh,kw] strided view."""
    n, c, h, w = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (n, c, oh, ow, kh, kw),
        (s[0], s[1], s[2] * sh, s[3] * sw, s[2], s[3]), writeable=False)


def pad4(x, pads, value=0.0):
    t, l, b, r = pads
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def conv(x, w, b, a):
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise NotImplementedError("auto_pad")
    g = a.get("group", 1)
    sh, sw = a.get("strides", [1, 1])
    if a.get("dilations", [1, 1]) != [1, 1]:
        raise NotImplementedError("dilation")
    x = pad4(x, a.get("pads", [0, 0, 0, 0]))
    co, ci, kh, kw = w.shape
    outs = []
    for gi in range(g):
        xg = x[:, gi * ci:(gi + 1) * ci]
        wg = w[gi * (co // g):(gi + 1) * (co // g)]
        win = windows(np.ascontiguousarray(xg), kh, kw, sh, sw)
        outs.append(np.einsum("ncyxij,ocij->noyx", win, wg, optimize=True))
    y = np.concatenate(outs, 1)
    if b is not None:
        y = y + b[None, :, None, None]
    return y


def pool(x, a, kind):
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [1, 1])
    pads = a.get("pads", [0, 0, 0, 0])
    if kind == "max":
        win = windows(np.ascontiguousarray(pad4(x, pads, -np.inf)), kh, kw, sh, sw)
        return win.max(axis=(4, 5))
    if any(pads) and not a.get("count_include_pad", 0):
        raise NotImplementedError("AveragePool with pads excluded")
    win = windows(np.ascontiguousarray(pad4(x, pads)), kh, kw, sh, sw)
    return win.mean(axis=(4, 5))


def run(model, x):
    env = {i.name: numpy_helper.to_array(i).astype(np.float64)
           if numpy_helper.to_array(i).dtype.kind == "f" else numpy_helper.to_array(i)
           for i in model.graph.initializer}
    env[model.graph.input[0].name] = x.astype(np.float64)
    for node in model.graph.node:
        a = attrs(node)
        i = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "Conv":
            y = conv(i[0], i[1], i[2] if len(i) > 2 else None, a)
        elif op == "Gemm":
            A = i[0].T if a.get("transA", 0) else i[0]
            B = i[1].T if a.get("transB", 0) else i[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(i) > 2 and i[2] is not None:
                y = y + a.get("beta", 1.0) * i[2]
        elif op == "MatMul":
            y = i[0] @ i[1]
        elif op == "Relu":
            y = np.maximum(i[0], 0)
        elif op == "Clip":
            lo = i[1] if len(i) > 1 and i[1] is not None else -np.inf
            hi = i[2] if len(i) > 2 and i[2] is not None else np.inf
            y = np.clip(i[0], lo, hi)
        elif op == "MaxPool":
            y = pool(i[0], a, "max")
        elif op == "AveragePool":
            y = pool(i[0], a, "avg")
        elif op == "GlobalAveragePool":
            y = i[0].mean(axis=(2, 3), keepdims=True)
        elif op == "BatchNormalization":
            s = i[1] / np.sqrt(i[4] + a.get("epsilon", 1e-5))
            y = (i[0] - i[3][None, :, None, None]) * s[None, :, None, None] \
                + i[2][None, :, None, None]
        elif op == "Add":
            y = i[0] + i[1]
        elif op == "Flatten":
            ax = a.get("axis", 1)
            y = i[0].reshape(int(np.prod(i[0].shape[:ax])), -1)
        elif op == "Reshape":
            shp = [d if d != 0 else i[0].shape[k] for k, d in enumerate(i[1])]
            y = i[0].reshape(shp)
        elif op in ("Dropout", "Identity"):
            y = i[0]
        else:
            raise NotImplementedError(f"op {op} (node {node.name})")
        env[node.output[0]] = y
    return env[model.graph.output[0].name]


def check(d):
    name = os.path.basename(os.path.normpath(d))
    model = onnx.load(os.path.join(d, "model.onnx"))
    onnx.checker.check_model(model)
    x = np.load(os.path.join(ROOT, "models", "fmnist-data", "val_inputs.npy"))[:64]
    ref = np.load(os.path.join(ROOT, "models", "fmnist-data", "ref", f"{name}.npy"))
    y = run(model, x)
    err = float(np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-12))
    ok = err <= 1e-4 and (y.argmax(1) == ref.argmax(1)).all()
    print(f"{name}: max relative error {err:.2e} vs PyTorch -> "
          f"{'OK' if ok else 'MISMATCH'}")
    return ok


def main():
    dirs = sys.argv[1:] or sorted(glob.glob(os.path.join(ROOT, "models", "fmnist", "*")))
    bad = [d for d in dirs if not check(d)]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
