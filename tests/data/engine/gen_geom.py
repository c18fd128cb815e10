#!/usr/bin/python3
"""Models whose shapes or shape attributes are absurd (Conv /
ConvTranspose / pool geometry, Split sizes, empty tensors with huge
dims), each refused at load. Written with protoc's Python classes for Debian's
onnx.proto (python3-protobuf, protobuf-compiler), not the onnx package:

    /usr/bin/python3 tests/data/engine/gen_geom.py

bad_conv_dilation: Conv with dilations [2^62] on a kernel of 3: the
               dilated kernel (k - 1) * d + 1 overflowed int64 (UBSan).
bad_deconv_stride: ConvTranspose with strides [2^62] on an input of 5:
               its full output s * (in - 1) overflowed int64 (UBSan).
bad_pool_window: MaxPool with a 2^21 x 2^21 x 2^21 window (strides as
               large, so the output stays small): the window's element
               count 2^63, counted for the model's FLOPs, overflowed
               int64 (UBSan).
bad_deconv_dilation: ConvTranspose with dilations [-2^63] on a kernel of
               3: the dilated kernel (k - 1) * d + 1 was computed before
               the dilation was checked and overflowed int64 (UBSan; found
               by fuzz_onnx's structure-aware mutator).
bad_deconv_oshape: ConvTranspose of an empty spatial dim (stride 2^30) with
               output_shape [2^63 - 1]: full output minus the wanted one
               overflowed int64 (UBSan).
bad_empty_input, bad_empty_init, bad_empty_expand: a graph input
               [N, 2^30, 2^30, 2^30, 0], an initializer [0, 2^62, 2^62]
               (Flatten), an Expand of [1, 0] (fixed) to [2^40, 2^40, 0]: no
               elements, so the element limit let them through, but the
               product of their other dims overflowed int64 (UBSan) in
               every element count and stride taken of them.
bad_split_wrap: Split (opset 11, sizes as an attribute) of a dim of 3 into
               [2^62, 2^62, 2^62, 2^62 + 3]: the sizes' sum wrapped to 3 and
               passed the check that they sum to the dim (UBSan).
"""
import os
import subprocess
import sys
import tempfile

D = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp()
subprocess.run(["protoc", "--proto_path=/usr/include/onnx", "--python_out=" + tmp, "onnx.proto"],
               check=True)
sys.path.insert(0, tmp)
import onnx_pb2 as P  # noqa: E402

FLOAT, INT64 = 1, 7


def value_info(g, name, dims, out=False):
    v = (g.output if out else g.input).add()
    v.name = name
    t = v.type.tensor_type
    t.elem_type = FLOAT
    for d in dims:
        dim = t.shape.dim.add()
        if isinstance(d, str):
            dim.dim_param = d
        else:
            dim.dim_value = d


def save(name, op, x_dims, attrs, w_dims=None, opset=13, nout=1, inputs=("x", "w"), consts=()):
    m = P.ModelProto()
    m.ir_version = 8
    m.opset_import.add(domain="", version=opset)
    g = m.graph
    g.name = name
    node = g.node.add()
    node.name, node.op_type = op.lower(), op
    node.input.append(inputs[0])
    for cname, cvals in consts:
        c = g.initializer.add()
        c.name, c.data_type = cname, INT64
        c.dims.append(len(cvals))
        c.int64_data.extend(cvals)
        node.input.append(cname)
    if w_dims:
        if len(inputs) > 1:
            node.input.append(inputs[1])
        w = g.initializer.add()
        w.name, w.data_type = "w", FLOAT
        w.dims.extend(w_dims)
        n = 1
        for d in w_dims:
            n *= d
        w.float_data.extend([0.5] * n)
    outs = ["y"] if nout == 1 else ["y%d" % i for i in range(nout)]
    node.output.extend(outs)
    for k, v in attrs.items():
        a = node.attribute.add()
        if isinstance(v, list):
            a.name, a.type = k, P.AttributeProto.INTS
            a.ints.extend(v)
        else:
            a.name, a.type, a.i = k, P.AttributeProto.INT, v
    value_info(g, "x", x_dims)
    for o in outs:
        out = g.output.add()
        out.name = o
        out.type.tensor_type.elem_type = FLOAT
    with open(os.path.join(D, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


save("bad_conv_dilation", "Conv", ["N", 1, 5], {"dilations": [2 ** 62]}, [1, 1, 3])
save("bad_deconv_stride", "ConvTranspose", ["N", 1, 5], {"strides": [2 ** 62]}, [1, 1, 3])
save("bad_deconv_dilation", "ConvTranspose", ["N", 1, 5], {"dilations": [-2 ** 63]}, [1, 1, 3])
save("bad_deconv_oshape", "ConvTranspose", ["N", 1, 0],
     {"strides": [2 ** 30], "output_shape": [2 ** 63 - 1]}, [1, 1, 1])
k = 2 ** 21
save("bad_pool_window", "MaxPool", ["N", 1, 1, 1, 1],
     {"kernel_shape": [k] * 3, "strides": [k] * 3, "pads": [k - 1] * 6})
save("bad_split_wrap", "Split", ["N", 3], {"split": [2 ** 62] * 3 + [2 ** 62 + 3], "axis": 1},
     opset=11, nout=4)
save("bad_empty_input", "Relu", ["N", 2 ** 30, 2 ** 30, 2 ** 30, 0], {})
save("bad_empty_init", "Flatten", ["N", 3], {"axis": 1}, [0, 2 ** 62, 2 ** 62], inputs=("w",))
save("bad_empty_expand", "Expand", [1, 0], {}, consts=[("shape", [2 ** 40, 2 ** 40, 0])])
