#!/usr/bin/python3
"""Seed corpus for tests/fuzz/fuzz_onnx.c: tiny models (a few hundred bytes
each) covering the loader paths. Run: /usr/bin/python3 tests/fuzz/gen_onnx_seeds.py"""
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto as T

D = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "onnx")


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    with open(os.path.join(D, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def vi(n, s, t=T.FLOAT):
    return helper.make_tensor_value_info(n, t, s)


r = np.random.RandomState(0)
w = numpy_helper.from_array(r.randn(4, 2, 3, 3).astype(np.float32), "w")
b = numpy_helper.from_array(r.randn(4).astype(np.float32), "b")
save("conv_relu", [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                   helper.make_node("Relu", ["c"], ["y"])],
     [vi("x", ["N", 2, 5, 5])], [vi("y", ["N", 4, 5, 5])], [w, b])
shp = numpy_helper.from_array(np.array([0, -1], np.int64), "shp")
save("shape_chain", [helper.make_node("Shape", ["x"], ["s"]),
                     helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
                     helper.make_node("Unsqueeze", ["n", "ax"], ["nu"]),
                     helper.make_node("Concat", ["nu", "m1"], ["sh"], axis=0),
                     helper.make_node("Reshape", ["x", "sh"], ["y"])],
     [vi("x", ["N", 3, 4])], [vi("y", ["N", 12])],
     [numpy_helper.from_array(np.array(0, np.int64), "i0"),
      numpy_helper.from_array(np.array([0], np.int64), "ax"),
      numpy_helper.from_array(np.array([-1], np.int64), "m1")])
mw = numpy_helper.from_array(r.randn(6, 3).astype(np.float32), "mw")
mb = numpy_helper.from_array(r.randn(3).astype(np.float32), "mb")
save("matmul_softmax", [helper.make_node("MatMul", ["x", "mw"], ["m"]),
                        helper.make_node("Add", ["m", "mb"], ["a"]),
                        helper.make_node("Softmax", ["a"], ["y"], axis=-1)],
     [vi("x", ["N", 6])], [vi("y", ["N", 3])], [mw, mb])
save("pool_bn", [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], ceil_mode=1),
                 helper.make_node("BatchNormalization", ["p", "g", "be", "mu", "va"], ["y"])],
     [vi("x", [1, 2, 5, 5])], [vi("y", [1, 2, 3, 3])],
     [numpy_helper.from_array(np.ones(2, np.float32), n) for n in ["g", "be", "mu", "va"]])
save("transpose_slice", [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                         helper.make_node("Slice", ["t", "st", "en"], ["y"])],
     [vi("x", [4, 3])], [vi("y", [2, 4])],
     [numpy_helper.from_array(np.array([1], np.int64), "st"),
      numpy_helper.from_array(np.array([3], np.int64), "en")])
save("unknown_op", [helper.make_node("Mystery", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
