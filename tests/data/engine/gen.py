#!/usr/bin/python3
"""Generates the engine's small test models (committed; a few KB each).

    /usr/bin/python3 tests/data/engine/gen.py

tiny_cnn:  Conv(+BN, +ReLU, groups, dilation, residual Add), pools, Gemm,
           Softmax, dynamic batch; reference from PyTorch.
tiny_tf:   transformer block at opset 13 (LayerNorm decomposed into
           ReduceMean/Sub/Pow/Sqrt/Div, GELU via Erf, attention with
           Shape->Gather->Concat->Reshape chains, Transpose, Softmax).
bad_*:     malformed models for error-path tests (onnx.helper).
Fixed seeds: re-running reproduces the same files.
"""
import os
import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
from onnx import helper, TensorProto

D = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(7)


class TinyCnn(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 8, 3, padding=1)
        s.b1 = nn.BatchNorm2d(8)
        s.c2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
        s.b2 = nn.BatchNorm2d(8)
        s.c3 = nn.Conv2d(8, 16, 1, stride=2)
        s.fc = nn.Linear(16 * 2 * 2, 5)

    def forward(s, x):
        y = torch.relu(s.b1(s.c1(x)))
        y = torch.relu(s.b2(s.c2(y)) + y)
        y = nn.functional.max_pool2d(y, 2, ceil_mode=True)
        y = nn.functional.hardswish(s.c3(y))
        y = nn.functional.avg_pool2d(y, 2, ceil_mode=True)
        return torch.softmax(s.fc(torch.flatten(y, 1)), 1)


class TinyDeconv(nn.Module):
    """Grouped, strided ConvTranspose with output_padding, then a plain one."""
    def __init__(s):
        super().__init__()
        s.d1 = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        s.d2 = nn.ConvTranspose2d(6, 3, 4, stride=2, padding=1, dilation=2)

    def forward(s, x):
        return s.d2(torch.relu(s.d1(x)))


class TinyTf(nn.Module):
    def __init__(s, d=16, h=2):
        super().__init__()
        s.h, s.d = h, d
        s.ln = nn.LayerNorm(d)
        s.qkv = nn.Linear(d, 3 * d)
        s.o = nn.Linear(d, d)
        s.ff = nn.Linear(d, 2 * d)
        s.ff2 = nn.Linear(2 * d, d)

    def forward(s, x):
        n, t, d = x.shape
        q, k, v = s.qkv(s.ln(x)).chunk(3, dim=-1)
        sh = lambda z: z.reshape(n, t, s.h, d // s.h).transpose(1, 2)
        a = torch.softmax(sh(q) @ sh(k).transpose(-1, -2) / (d // s.h) ** 0.5, -1)
        y = (a @ sh(v)).transpose(1, 2).reshape(n, t, d)
        x = x + s.o(y)
        return x + s.ff2(nn.functional.gelu(s.ff(s.ln(x))))


def export(m, x, name, inp, out):
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.2, 0.2)
    m.eval()
    torch.onnx.export(m, x, os.path.join(D, name + ".onnx"), input_names=[inp],
                      output_names=[out], opset_version=13,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE,
                      dynamic_axes={inp: {0: "N"}, out: {0: "N"}})
    np.save(os.path.join(D, name + "_in.npy"), x.numpy())
    np.save(os.path.join(D, name + "_out.npy"), m(x).detach().numpy())


def bad_models():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    op = helper.make_opsetid("", 13)

    def save(name, nodes, inits=(), inputs=(x,), outputs=(y,)):
        g = helper.make_graph(nodes, name, list(inputs), list(outputs), list(inits))
        m = helper.make_model(g, opset_imports=[op], producer_name="vario-test")
        onnx.save(m, os.path.join(D, name + ".onnx"))

    save("bad_unknown_op", [helper.make_node("FrobnicateTensor", ["x"], ["y"], name="mystery")])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.zeros(16, np.float32).tobytes(), raw=True)
    w.raw_data = np.zeros(12, np.float32).tobytes()  # 48 bytes for 16 floats
    save("bad_init_size", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [w])
    save("bad_undefined_input", [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")])
    save("ok_relu", [helper.make_node("Relu", ["x"], ["y"], name="relu")])
    save("bad_rank", [helper.make_node("Conv", ["x", "x"], ["y"], name="conv")])


def external_data():
    """ext/model.onnx keeps its weights in ext/weights.bin (ONNX external
    data, with offsets); bad_ext_path.onnx points outside its directory."""
    from onnx.external_data_helper import convert_model_to_external_data
    os.makedirs(os.path.join(D, "ext"), exist_ok=True)
    r = np.random.RandomState(3)
    w = onnx.numpy_helper.from_array(r.randn(6, 4).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(r.randn(4).astype(np.float32), "b")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc")],
                          "ext", [x], [y], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    convert_model_to_external_data(m, all_tensors_to_one_file=True, location="weights.bin",
                                   size_threshold=0)
    onnx.save(m, os.path.join(D, "ext", "model.onnx"))
    xv = r.randn(2, 6).astype(np.float32)
    np.save(os.path.join(D, "ext", "in.npy"), xv)
    np.save(os.path.join(D, "ext", "out.npy"), xv @ onnx.numpy_helper.to_array(w) +
            onnx.numpy_helper.to_array(b))
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../../secret.bin"
    onnx.save(m, os.path.join(D, "bad_ext_path.onnx"))


if __name__ == "__main__":
    export(TinyCnn(), torch.randn(3, 3, 9, 9), "tiny_cnn", "input", "probs")
    export(TinyTf(), torch.randn(2, 5, 16), "tiny_tf", "tokens", "hidden")
    export(TinyDeconv(), torch.randn(2, 4, 5, 7), "tiny_deconv", "x", "y")
    bad_models()
    external_data()
