#!/usr/bin/python3
"""Small models for engine semantics found wrong by review (numpy and onnx
only, no torch), each with a dynamic batch, an input and a numpy reference:

    /usr/bin/python3 tests/data/engine/gen_semantics.py

alias_branch:  Tanh -> Reshape (a view) -> Relu, and Sigmoid of the Tanh:
               Relu in place on the view overwrote what Sigmoid reads.
alias_output:  the Tanh is a graph output and its view feeds Relu.
avgpool_ceil:  AveragePool ceil_mode=1 count_include_pad=1, no pads: the
               last window divides by its part within the input.
gemm_alpha0:   Gemm alpha=0 with C: Y = beta C (was NaN).
conv_clip_conv: Conv -> Clip(0, 6) -> Conv, for int8 (the chained scale
               went in before the Clip).
reduce_rows:   ReduceMean over the batch: one output row whatever the
               batch (an offline job sized its result from the first
               chunk and overran it on the next).
foldbn_uaf:    54 Neg (an identity) then Conv -> BatchNormalization: folding
               the BN adds the 64th value, which moved the value array
               under the fold (heap use-after-free, seen under ASan).
sum_inplace_view: Conv -> Identity, Conv(+Add of the Identity): the fused
               sum aliased its output onto the second conv's own input
               (the Identity is a view of it).
matmul1d_bias: MatMul of a 1-D input (the reference kernel) + bias: the
               bias was fused into the MatMul and dropped (fixed shapes).
ln_gamma_col:  decomposed LayerNorm times a gamma [8, 1] that broadcasts
               along the second-last axis: not a LayerNormalization's
               gamma, but the pattern fusion took it as one.
lrn_even:      LRN with an even size: ONNX's window has one more channel
               after c than before, oneDNN's is centred (wrong values).
int8_gemm_scalar_c: Gemm with a 0-d C, for int8: the per-column bias check
               read C's shape[-1] (UBSan).
bf16_rt_matmul_relu: MatMul of two runtime tensors (x and its transpose)
               + Relu, for bf16: was refused ("no kernel").
int_div_min:   int64 Div and Mod of INT64_MIN by -1 at run time (the input
               cast to int64): the division trapped (SIGFPE); it wraps.
               The output subtracts the input again to stay small.
slice_big_step: Slice with steps INT64_MAX and INT64_MIN (one element per
               axis): the output length overflowed (UBSan; empty slice).
int_wrap:      int64 Mul, Neg, Add that overflow, and Pow with an exponent
               past 64, at run time: signed overflow (UBSan) and
               (-1)^65 = 1; they wrap (two's complement).
clip_min_gt_max: Clip with min 0.5 > max -0.5, alone (reference kernel)
               and after a Conv (a oneDNN post-op): every value is max
               (ONNX). The kernel gave min to the values below it, the
               post-op left the values unclipped.
range_big:     int64 Range(2^60, 2^60 + 3, 1) - 2^60 added to the input: the
               count went through double (2^60 + 3 rounds to 2^60): empty.
int_big:       int64 Equal, Max and Clip of 2^53 + the input against
               2^53 + 1 .. 2^53 + 3: they went through double (2^53 + 1
               == 2^53, 2^53 + 3 became 2^53 + 4).
batch_min:     x + Min(batch, 3), at batch 5 (not batch independent: the
               test runs the whole batch): the three probe batches made
               Min(B, 3) look like B (x + 5).
batch_wrap:    x + (B x 2^62 - B x (2^62 - 1) - B): B x 2^62 wraps (int64), so
               its differences between the probe batches overflowed
               (UBSan) when the fold classified it.
bad_tile_wrap, bad_pad_wrap: a Tile repeat of (2^64 + 2) / 3 on a dim of 3,
               pads of INT64_MAX on both sides of a dim of 3: the output
               dim overflowed int64 and wrapped to 2 (Tile) and 1 (Pad);
               refused at load (written without the reference: no run).
bad_ext_missing: an initializer of 2^34 floats (64 GiB) in an external file
               that does not exist: the claimed size was allocated before
               the file was looked for, and the error was that allocation's.
bad_pad_float, bad_reduce_float_axes: Pad's pads, ReduceSum's axes as
               float (1e30): converted to int64 with undefined behaviour
               (UBSan); refused at load (ONNX types them int64).
bad_dropout_float: Dropout's training_mode as float 1e30, the same
               (ONNX types it bool).
bad_range_huge: float Range(0, 1e30, 1): its length was converted to int64
               before the limit was checked (undefined, UBSan).
bad_const_type: a Constant whose value_ints holds floats (type FLOATS), the
               shape of a Reshape: read as an empty shape, x [1, 1] became
               a scalar; refused at load.
bad_input_dim: an input of shape [N, -1] (-1 as a dim_value): refused with
               "must be a fixed size", which it is; the message gives the
               value and the range.
bad_gemm_trans: Gemm with transB = 17: it indexed B's shape (shape[17],
               past its 8 dims; UBSan, found by fuzz_onnx); refused.
reduce_noop:   ReduceSum with noop_with_empty_axes=1 and no axes input: an
               Identity (ONNX); it reduced every axis ([1, 1]).
gelu_vec_half, gelu_vec_div: the erf-GELU pattern whose 0.5 is a vector
               [0.5, 0.5, 0.5, 0.25], or whose sqrt(2) is [sqrt(2), sqrt(2),
               1, 2]: a tensor that is not a one-value constant passed the
               constant's check (NAN compares false) and the pattern became
               a Gelu (wrong values in the columns that differ).
matmul_m0:     Concat(MatMul(x[0:0], W), MatMul(x, W)): a MatMul with no
               rows (M = 0) killed the process with SIGFPE while oneDNN
               created its primitive.
matmul_k0:     MatMul(x[:, 0:0], W0 [0, 4]) + x: an empty inner dim (K = 0),
               zeros; in bf16 oneDNN raised SIGFPE creating the matmul.
int_pow_neg:   int64 Pow with negative exponents at run time: 1 / a^-b
               truncated (0 unless |a| is 1; (-1)^-1 = -1), as ORT; it
               was 1 for every base.
slice_neg_start: Slice(x, starts -10, ends -100, steps -1) on a dim of 5:
               ONNX clamps the start into [0, 4] for negative steps, so it
               takes x[:, 0]; the start became -1 (empty).
batch_shape_min: x + dim 0 of Slice(x, 0:3) + dim 2 of MaxPool(stride 3)
               over x's rows, at batch 5 (min(B, 3) + ceil(B / 3) = 5): the
               Shapes folded from the three probe batches, as B and as 1
               (x + 6); a Shape of such a value is checked at every batch.
gemm_alpha0_relu: Gemm alpha=0 with C, then Relu: the Relu was fused into
               the Gemm, which runs on the reference kernel (alpha 0) that
               takes no post-op: refused ("no kernel").
matmul_m0_relu: matmul_m0 with a Relu after the empty MatMul: fused into
               it, and the reference kernel that an empty MatMul takes
               refused the post-op ("no kernel").
deconv_outshape: ConvTranspose stride 2 with output_shape [6, 6] (the full
               output is 7 x 7) and explicit pads, which ONNX ignores then:
               auto_pad NOTSET puts the odd pad at the start (crops row and
               column 0), as ORT; it was put at the end.
deconv_outshape_full: deconv_outshape with output_shape in its full N, C,
               spatial form [2, 3, 6, 6] (ORT takes both forms): refused
               ("has 4 values, expected 2").
max_nan:       Max(x, c) and Min(x, c) with NaNs in x and in c, each
               mapped to 1 where not NaN (Equal(m, m)), summed: a NaN
               propagates (numpy, ORT); the NaN operand was dropped
               (Max(NaN, 1) = 1, Max(1, NaN) = 1).
bad_clip_empty_min, bad_range_empty: a Clip min, a Range start with no
               element (scalars): element 0 was read past the data (Clip
               clipped at whatever lay there); refused at load.
bad_attr_perm_int, bad_attr_alpha_int, bad_attr_axis_string: Transpose's
               perm as INT, LeakyRelu's alpha as INT, Softmax's axis as
               STRING (ONNX: INTS, FLOAT, INT): the accessors took the
               default (perm reversed the dims, the axis -1) or converted
               the INT; refused at load, as ORT does.
uint64_big:    x (0..3) cast to uint64 plus 2^63, against uint64 constants
               on both sides of 2^63: Greater, Less, Max, Min, Div, Mod,
               Clip, Cast to float, and float 2^63 + 2^60 x cast to uint64.
               uint64 was read as int64, so the values past 2^63 were
               negative (Greater false, Cast -9.2e18, Max the other one)
               and a float past 2^63 saturated at 2^63 - 1.
int_fmod:      int64 Mod with fmod=1 of signed values by [3, -3, 5, -5]: C's
               remainder, the sign of the dividend (ONNX allows fmod=1 on
               integers); it was refused ("fmod on integers").
act_nan:       HardSigmoid of float32 and Relu of float64 (the reference
               kernels; float32 Relu runs on oneDNN) with NaNs in x, each
               NaN mapped to -7 (Where(Equal(v, v), v, -7)): a NaN stays
               NaN (ONNX, ORT); the kernels gave 1 and 0 (fminf / fmaxf
               and a comparison with 0 drop it).
reduce_nan:    ReduceMax and ReduceMin over rows with and without a NaN, the
               NaN mapped to -7: a row with a NaN reduces to NaN (ONNX's
               reference, numpy); fmax / fmin dropped it.
Fixed seed: re-running reproduces the same files.
"""
import os
import numpy as np
import onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T

D = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261128)


def save(name, nodes, inp, outs, inits, x, y, dyn=True):
    """outs: (name, shape) with "N" (or "M") for the dynamic first dim;
    dyn=False: the input's shape is fixed (x.shape)."""
    ishape = (["N"] + list(x.shape[1:])) if dyn else list(x.shape)
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(inp, T.FLOAT, ishape)],
                     [h.make_tensor_value_info(o, T.FLOAT, sh) for o, sh in outs],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(D, name + ".onnx"))
    np.save(os.path.join(D, name + "_in.npy"), x.astype(np.float32))
    np.save(os.path.join(D, name + "_out.npy"), np.ascontiguousarray(y, np.float32))


x = rng.uniform(-2, 2, (3, 8)).astype(np.float32)
shp = {"shp": np.array([-1, 4], np.int64)}
save("alias_branch",
     [h.make_node("Tanh", ["x"], ["s"]), h.make_node("Reshape", ["s", "shp"], ["r"]),
      h.make_node("Relu", ["r"], ["y1"]), h.make_node("Sigmoid", ["s"], ["y2"])],
     "x", [("y2", ["N", 8]), ("y1", ["M", 4])], shp, x, 1 / (1 + np.exp(-np.tanh(x))))
save("alias_output",
     [h.make_node("Tanh", ["x"], ["a"]), h.make_node("Reshape", ["a", "shp"], ["r"]),
      h.make_node("Relu", ["r"], ["y"])],
     "x", [("a", ["N", 8]), ("y", ["M", 4])], shp, x, np.tanh(x))

x = rng.uniform(0, 1, (2, 1, 5)).astype(np.float32)
ref = np.stack([x[..., 0:2].mean(-1), x[..., 2:4].mean(-1), x[..., 4]], -1)
save("avgpool_ceil",
     [h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2], strides=[2], ceil_mode=1,
                  count_include_pad=1)],
     "x", [("y", ["N", 1, 3])], {}, x, ref)

x = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((4, 5)).astype(np.float32)
C = rng.standard_normal((5,)).astype(np.float32)
save("gemm_alpha0", [h.make_node("Gemm", ["x", "B", "C"], ["y"], alpha=0.0, beta=2.0)],
     "x", [("y", ["N", 5])], {"B": B, "C": C}, x, np.broadcast_to(2 * C, (3, 5)))

W1 = (rng.standard_normal((8, 4, 1, 1)) * 3).astype(np.float32)
W2 = rng.standard_normal((8, 8, 1, 1)).astype(np.float32)
x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
c1 = np.einsum("oi,nihw->nohw", W1[:, :, 0, 0], x)
ref = np.einsum("oi,nihw->nohw", W2[:, :, 0, 0], np.clip(c1, 0, 6))
save("conv_clip_conv",
     [h.make_node("Conv", ["x", "W1"], ["c1"]), h.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
      h.make_node("Conv", ["r1", "W2"], ["y"])],
     "x", [("y", ["N", 8, 6, 6])], {"W1": W1, "W2": W2, "lo": np.array(0, np.float32),
                  "hi": np.array(6, np.float32)}, x, ref)

x = rng.standard_normal((3, 1, 28, 28)).astype(np.float32)
save("reduce_rows", [h.make_node("ReduceMean", ["x"], ["y"], axes=[0], keepdims=1)],
     "x", [("y", [1, 1, 28, 28])], {}, x, x.mean(0, keepdims=True))


def conv2d(x, W, b, pad):
    """Stride 1, square pads: y[n, o, i, j]."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = W.shape[2:]
    H, Wd = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    y = np.zeros((x.shape[0], W.shape[0], H, Wd))
    for i in range(H):
        for j in range(Wd):
            y[:, :, i, j] = np.einsum("nckl,ockl->no", xp[:, :, i:i + kh, j:j + kw], W)
    return y + b.reshape(1, -1, 1, 1)


x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
B, s, bb, mu = (rng.standard_normal(4).astype(np.float32) for _ in range(4))
var = rng.uniform(0.5, 2, 4).astype(np.float32)
negs = [h.make_node("Neg", ["x" if i == 0 else f"p{i - 1}"], [f"p{i}"]) for i in range(54)]
c = conv2d(x, W, B, 1)
ref = (c - mu.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-5) * \
    s.reshape(1, -1, 1, 1) + bb.reshape(1, -1, 1, 1)
save("foldbn_uaf",
     negs + [h.make_node("Conv", ["p53", "W", "B"], ["c"], pads=[1] * 4),
             h.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["y"])],
     "x", [("y", ["N", 4, 5, 5])], {"W": W, "B": B, "s": s, "bb": bb, "mu": mu, "var": var}, x, ref)

C = 16
WA = (rng.standard_normal((C, C, 3, 3)) * 0.2).astype(np.float32)
WB = (rng.standard_normal((C, C, 3, 3)) * 0.2).astype(np.float32)
x = rng.standard_normal((2, C, 6, 6)).astype(np.float32)
hh = conv2d(x, WA, np.zeros(C), 1)
save("sum_inplace_view",
     [h.make_node("Conv", ["x", "WA"], ["h"], pads=[1] * 4), h.make_node("Identity", ["h"], ["u"]),
      h.make_node("Conv", ["h", "WB"], ["c"], pads=[1] * 4), h.make_node("Add", ["c", "u"], ["y"])],
     "x", [("y", ["N", C, 6, 6])], {"WA": WA, "WB": WB}, x, conv2d(hh, WB, np.zeros(C), 1) + hh)

K, N = 8, 5
W = rng.standard_normal((K, N)).astype(np.float32)
b = rng.standard_normal(N).astype(np.float32)
x = rng.standard_normal(K).astype(np.float32)
save("matmul1d_bias", [h.make_node("MatMul", ["x", "W"], ["m"]), h.make_node("Add", ["m", "b"], ["y"])],
     "x", [("y", [N])], {"W": W, "b": b}, x, x @ W + b, dyn=False)

x = rng.standard_normal((2, 8, 8)).astype(np.float32)
g2 = rng.standard_normal((8, 1)).astype(np.float32)
m = x.mean(-1, keepdims=True)
v = ((x - m) ** 2).mean(-1, keepdims=True)
save("ln_gamma_col",
     [h.make_node("ReduceMean", ["x"], ["m"], axes=[-1]), h.make_node("Sub", ["x", "m"], ["d"]),
      h.make_node("Pow", ["d", "two"], ["p"]), h.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
      h.make_node("Add", ["v", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["sd"]),
      h.make_node("Div", ["d", "sd"], ["n"]), h.make_node("Mul", ["n", "g2"], ["y"])],
     "x", [("y", ["N", 8, 8])],
     {"g2": g2, "two": np.array(2, np.float32), "eps": np.array(1e-2, np.float32)},
     x, (x - m) / np.sqrt(v + 1e-2) * g2)


def lrn(x, size, alpha, beta, bias):
    """ONNX LRN: channels [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    y = np.empty_like(x)
    C = x.shape[1]
    for c in range(C):
        lo, hi = max(0, c - (size - 1) // 2), min(C - 1, c + size // 2)
        y[:, c] = x[:, c] / (bias + alpha / size * (x[:, lo:hi + 1] ** 2).sum(1)) ** beta
    return y


x = rng.standard_normal((2, 6, 3, 3)).astype(np.float32)
save("lrn_even", [h.make_node("LRN", ["x"], ["y"], size=4, alpha=0.5, beta=0.75, bias=1.0)],
     "x", [("y", ["N", 6, 3, 3])], {}, x, lrn(x, 4, 0.5, 0.75, 1.0))

x = rng.standard_normal((3, 16)).astype(np.float32)
B = rng.standard_normal((16, 5)).astype(np.float32)
save("int8_gemm_scalar_c", [h.make_node("Gemm", ["x", "B", "C"], ["y"])], "x", [("y", ["N", 5])],
     {"B": B, "C": np.array(3.0, np.float32)}, x, x @ B + 3.0)

x = rng.standard_normal((2, 3, 4)).astype(np.float32)
save("bf16_rt_matmul_relu",
     [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]), h.make_node("MatMul", ["x", "xt"], ["m"]),
      h.make_node("Relu", ["m"], ["y"])],
     "x", [("y", ["N", 3, 3])], {}, x, np.maximum(x @ x.transpose(0, 2, 1), 0))

x = np.array([[-2.0 ** 63, 7], [5, -7], [-9, 9]], np.float32)
c = np.array([-1, 2], np.int64)
xi = [[int(v) for v in row] for row in x]
q = [[-2 ** 63 if (a == -2 ** 63 and b == -1) else int(a / b) for a, b in zip(row, c)] for row in xi]
r = [[a % int(b) for a, b in zip(row, c)] for row in xi]
ref = np.array([[qq + rr - a for qq, rr, a in zip(*t)] for t in zip(q, r, xi)], np.float32)
save("int_div_min",
     [h.make_node("Cast", ["x"], ["xi"], to=T.INT64), h.make_node("Div", ["xi", "c"], ["q"]),
      h.make_node("Mod", ["xi", "c"], ["r"]), h.make_node("Add", ["q", "r"], ["s"]),
      h.make_node("Sub", ["s", "xi"], ["d"]), h.make_node("Cast", ["d"], ["y"], to=T.FLOAT)],
     "x", [("y", ["N", 2])], {"c": c}, x, ref)

x = rng.standard_normal((2, 5, 3)).astype(np.float32)
i64 = np.iinfo(np.int64)
save("slice_big_step", [h.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], "x",
     [("y", ["N", 1, 1])], {"st": np.array([1, -1], np.int64), "en": np.array([i64.max, i64.min], np.int64),
                            "ax": np.array([1, 2], np.int64), "sp": np.array([i64.max, i64.min], np.int64)},
     x, x[:, 1::i64.max, -1::i64.min])


def wrap(v):
    return (v + 2 ** 63) % 2 ** 64 - 2 ** 63


x = np.array([[2.0 ** 62, 5], [-1, -2], [2, 7]], np.float32)
c, e = np.array([2, 3], np.int64), np.array([65, 3], np.int64)
ref = np.array([[wrap(wrap(-wrap(int(a) * int(k)) + 2 * int(a)) + wrap(int(a) ** int(p)))
                 for a, k, p in zip(row, c, e)] for row in x], np.float32)
save("int_wrap",
     [h.make_node("Cast", ["x"], ["xi"], to=T.INT64), h.make_node("Mul", ["xi", "c"], ["m"]),
      h.make_node("Neg", ["m"], ["n"]), h.make_node("Add", ["n", "xi"], ["a1"]),
      h.make_node("Add", ["a1", "xi"], ["a2"]), h.make_node("Pow", ["xi", "e"], ["p"]),
      h.make_node("Add", ["a2", "p"], ["s"]), h.make_node("Cast", ["s"], ["y"], to=T.FLOAT)],
     "x", [("y", ["N", 2])], {"c": c, "e": e}, x, ref)

x = rng.standard_normal((3, 2, 2, 2)).astype(np.float32)
save("clip_min_gt_max",
     [h.make_node("Clip", ["x", "lo", "hi"], ["a"]), h.make_node("Conv", ["x", "W"], ["c"]),
      h.make_node("Clip", ["c", "lo", "hi"], ["b"]), h.make_node("Mul", ["a", "b"], ["y"])],
     "x", [("y", ["N", 2, 2, 2])], {"lo": np.array(0.5, np.float32), "hi": np.array(-0.5, np.float32),
                                    "W": rng.standard_normal((2, 2, 1, 1)).astype(np.float32)},
     x, np.full_like(x, 0.25))

x = rng.standard_normal((2, 3)).astype(np.float32)
b60 = np.array(2 ** 60, np.int64)
save("range_big",
     [h.make_node("Range", ["s", "l", "d"], ["r"]), h.make_node("Sub", ["r", "s"], ["o"]),
      h.make_node("Cast", ["o"], ["of"], to=T.FLOAT), h.make_node("Add", ["x", "of"], ["y"])],
     "x", [("y", ["N", 3])], {"s": b60, "l": b60 + 3, "d": np.array(1, np.int64)}, x, x + np.arange(3))

x = np.array([[0, 3], [1, 2], [5, -1]], np.float32)
xi = x.astype(np.int64)
ref = np.concatenate([(xi == 1), np.maximum(xi, 1), np.clip(xi, 1, 3)], 1).astype(np.float32)
save("int_big",
     [h.make_node("Cast", ["x"], ["xi"], to=T.INT64), h.make_node("Add", ["xi", "B"], ["big"]),
      h.make_node("Equal", ["big", "B1"], ["e"]), h.make_node("Cast", ["e"], ["ei"], to=T.INT64),
      h.make_node("Max", ["big", "B1"], ["mx"]), h.make_node("Sub", ["mx", "B"], ["m"]),
      h.make_node("Clip", ["big", "B1", "B3"], ["cl"]), h.make_node("Sub", ["cl", "B"], ["c"]),
      h.make_node("Concat", ["ei", "m", "c"], ["o"], axis=1), h.make_node("Cast", ["o"], ["y"], to=T.FLOAT)],
     "x", [("y", ["N", 6])], {"B": np.array(2 ** 53, np.int64), "B1": np.array(2 ** 53 + 1, np.int64),
                             "B3": np.array(2 ** 53 + 3, np.int64)}, x, ref)

x = rng.standard_normal((5, 4)).astype(np.float32)
save("batch_min",
     [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "z"], ["b"]),
      h.make_node("Min", ["b", "three"], ["m"]), h.make_node("Cast", ["m"], ["mf"], to=T.FLOAT),
      h.make_node("Add", ["x", "mf"], ["y"])],
     "x", [("y", ["N", 4])], {"z": np.array(0, np.int64), "three": np.array(3, np.int64)}, x, x + 3)


def save_bad(name, node, inits):
    """A model that must fail to load: x [N, 3] -> node -> y."""
    g = h.make_graph([node], name, [h.make_tensor_value_info("x", T.FLOAT, ["N", 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, os.path.join(D, name + ".onnx"))


save_bad("bad_tile_wrap", h.make_node("Tile", ["x", "r"], ["y"], name="tile"),
         {"r": np.array([1, (2 ** 64 + 2) // 3], np.int64)})
save_bad("bad_pad_wrap", h.make_node("Pad", ["x", "p"], ["y"], name="pad"),
         {"p": np.array([0, i64.max, 0, i64.max], np.int64)})
save_bad("bad_clip_empty_min", h.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip"),
         {"lo": np.zeros(0, np.float32), "hi": np.array(6, np.float32)})
save_bad("bad_range_empty", h.make_node("Range", ["s", "l", "d"], ["y"], name="range"),
         {"s": np.zeros(0, np.float32), "l": np.array(3, np.float32), "d": np.array(1, np.float32)})

w = onnx.TensorProto()
w.name, w.data_type, w.data_location = "w", T.FLOAT, onnx.TensorProto.EXTERNAL
w.dims.append(2 ** 34)
w.external_data.add(key="location", value="bad_ext_missing.bin")
m = h.make_model(h.make_graph([h.make_node("Add", ["x", "w"], ["y"], name="add")], "bad_ext_missing",
                              [h.make_tensor_value_info("x", T.FLOAT, [1])],
                              [h.make_tensor_value_info("y", T.FLOAT, None)], [w]),
                 opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, os.path.join(D, "bad_ext_missing.onnx"))

x = rng.standard_normal((3, 4)).astype(np.float32)
save("batch_wrap",
     [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "z"], ["b"]),
      h.make_node("Mul", ["b", "k"], ["p"]), h.make_node("Mul", ["b", "k1"], ["q"]),
      h.make_node("Sub", ["p", "q"], ["d"]), h.make_node("Sub", ["d", "b"], ["o"]),
      h.make_node("Cast", ["o"], ["of"], to=T.FLOAT), h.make_node("Add", ["x", "of"], ["y"])],
     "x", [("y", ["N", 4])], {"z": np.array(0, np.int64), "k": np.array(2 ** 62, np.int64),
                             "k1": np.array(2 ** 62 - 1, np.int64)}, x, x)
save_bad("bad_pad_float", h.make_node("Pad", ["x", "p"], ["y"], name="pad"),
         {"p": np.array([0, 1e30, 0, 1], np.float32)})
save_bad("bad_reduce_float_axes", h.make_node("ReduceSum", ["x", "a"], ["y"], name="sum"),
         {"a": np.array([1e30], np.float32)})
save_bad("bad_dropout_float", h.make_node("Dropout", ["x", "", "t"], ["y"], name="drop"),
         {"t": np.array(1e30, np.float32)})
save_bad("bad_range_huge", h.make_node("Range", ["s", "l", "d"], ["y"], name="range"),
         {"s": np.array(0, np.float32), "l": np.array(1e30, np.float32), "d": np.array(1, np.float32)})
a = h.make_attribute("value_ints", [1.0])
a.type = onnx.AttributeProto.FLOATS
c = h.make_node("Constant", [], ["shp"], name="shape")
c.attribute.append(a)
m = h.make_model(h.make_graph([c, h.make_node("Reshape", ["x", "shp"], ["y"], name="reshape")],
                              "bad_const_type", [h.make_tensor_value_info("x", T.FLOAT, [1, 1])],
                              [h.make_tensor_value_info("y", T.FLOAT, None)]),
                 opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, os.path.join(D, "bad_const_type.onnx"))
m = h.make_model(h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu")], "bad_input_dim",
                              [h.make_tensor_value_info("x", T.FLOAT, ["N", -1])],
                              [h.make_tensor_value_info("y", T.FLOAT, None)]),
                 opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, os.path.join(D, "bad_input_dim.onnx"))
save_bad("bad_gemm_trans", h.make_node("Gemm", ["x", "w"], ["y"], name="gemm", transB=17),
         {"w": np.zeros((3, 3), np.float32)})
x = rng.standard_normal((3, 4)).astype(np.float32)
save("reduce_noop", [h.make_node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)],
     "x", [("y", ["N", 4])], {}, x, x)
import math
x = rng.standard_normal((3, 4)).astype(np.float32)
erf = np.vectorize(math.erf)
for name, r2, half in [("gelu_vec_half", np.float32(math.sqrt(2)), np.array([0.5, 0.5, 0.5, 0.25], np.float32)),
                       ("gelu_vec_div", np.array([math.sqrt(2), math.sqrt(2), 1, 2], np.float32), np.float32(0.5))]:
    save(name, [h.make_node("Div", ["x", "r2"], ["a"]), h.make_node("Erf", ["a"], ["b"]),
                h.make_node("Add", ["b", "one"], ["c"]), h.make_node("Mul", ["x", "c"], ["d"]),
                h.make_node("Mul", ["d", "half"], ["y"])],
         "x", [("y", ["N", 4])], {"r2": np.array(r2), "one": np.array(1, np.float32), "half": np.array(half)},
         x, x.astype(np.float64) * (1 + erf(x / r2.astype(np.float64))) * half)
x = rng.standard_normal((3, 4)).astype(np.float32)
W = rng.standard_normal((4, 5)).astype(np.float32)
save("matmul_m0", [h.make_node("Slice", ["x", "z", "z"], ["e"]), h.make_node("MatMul", ["e", "W"], ["m0"]),
                   h.make_node("MatMul", ["x", "W"], ["m"]), h.make_node("Concat", ["m0", "m"], ["y"], axis=0)],
     "x", [("y", ["N", 5])], {"z": np.array([0], np.int64), "W": W}, x, x @ W)
x = rng.standard_normal((3, 4)).astype(np.float32)
save("matmul_k0", [h.make_node("Slice", ["x", "z", "z", "one"], ["e"]), h.make_node("MatMul", ["e", "W0"], ["m"]),
                   h.make_node("Add", ["m", "x"], ["y"])],
     "x", [("y", ["N", 4])], {"z": np.array([0], np.int64), "one": np.array([1], np.int64),
                               "W0": np.zeros((0, 4), np.float32)}, x, x)
x = np.array([[2, 1, -1, 3, -2, 4], [-1, 0, 5, 1, 7, -3]], np.float32)
e = np.array([-1, -1, -1, -2, -3, 0], np.int64)


def ipow(a, b):
    if b >= 0:
        return a ** b
    return 1 if a == 1 else (-1 if b % 2 else 1) if a == -1 else 0


save("int_pow_neg",
     [h.make_node("Cast", ["x"], ["xi"], to=T.INT64), h.make_node("Pow", ["xi", "e"], ["p"]),
      h.make_node("Cast", ["p"], ["y"], to=T.FLOAT)],
     "x", [("y", ["N", 6])], {"e": e}, x,
     np.array([[ipow(int(a), int(b)) for a, b in zip(r, e)] for r in x], np.float32))
x = rng.standard_normal((3, 5)).astype(np.float32)
save("slice_neg_start", [h.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])], "x", [("y", ["N", 1])],
     {"s": np.array([-10], np.int64), "e": np.array([-100], np.int64), "a": np.array([1], np.int64),
      "p": np.array([-1], np.int64)}, x, x[:, :1])
x = rng.standard_normal((5, 4)).astype(np.float32)
z = np.array(0, np.int64)
save("batch_shape_min",
     [h.make_node("Slice", ["x", "s0", "e0", "a0"], ["sl"]), h.make_node("Shape", ["sl"], ["ss"]),
      h.make_node("Gather", ["ss", "z"], ["d1"]),
      h.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), h.make_node("Unsqueeze", ["t", "a0"], ["u"]),
      h.make_node("MaxPool", ["u"], ["p"], kernel_shape=[1], strides=[3]), h.make_node("Shape", ["p"], ["ps"]),
      h.make_node("Gather", ["ps", "two"], ["d2"]), h.make_node("Add", ["d1", "d2"], ["d"]),
      h.make_node("Cast", ["d"], ["df"], to=T.FLOAT), h.make_node("Add", ["x", "df"], ["y"])],
     "x", [("y", ["N", 4])], {"s0": np.array([0], np.int64), "e0": np.array([3], np.int64),
                             "a0": np.array([0], np.int64), "z": z, "two": np.array(2, np.int64)}, x, x + 5)
x = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((4, 5)).astype(np.float32)
C = rng.standard_normal((5,)).astype(np.float32)
save("gemm_alpha0_relu", [h.make_node("Gemm", ["x", "B", "C"], ["g"], alpha=0.0, beta=0.5),
                          h.make_node("Relu", ["g"], ["y"])],
     "x", [("y", ["N", 5])], {"B": B, "C": C}, x, np.broadcast_to(np.maximum(0.5 * C, 0), (3, 5)))
x = rng.standard_normal((3, 4)).astype(np.float32)
W = rng.standard_normal((4, 5)).astype(np.float32)
save("matmul_m0_relu", [h.make_node("Slice", ["x", "z", "z"], ["e"]), h.make_node("MatMul", ["e", "W"], ["m0"]),
                        h.make_node("Relu", ["m0"], ["r0"]), h.make_node("MatMul", ["x", "W"], ["m"]),
                        h.make_node("Concat", ["r0", "m"], ["y"], axis=0)],
     "x", [("y", ["N", 5])], {"z": np.array([0], np.int64), "W": W}, x, x @ W)
x = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
W = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
full = np.zeros((2, 3, 7, 7))
for i in range(3):
    for j in range(3):
        full[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] += np.einsum("nc,cokl->nokl", x[:, :, i, j], W)
save("deconv_outshape", [h.make_node("ConvTranspose", ["x", "W"], ["y"], strides=[2, 2], output_shape=[6, 6],
                                     pads=[0, 0, 1, 1])],
     "x", [("y", ["N", 3, 6, 6])], {"W": W}, x, full[:, :, 1:, 1:])
save("deconv_outshape_full", [h.make_node("ConvTranspose", ["x", "W"], ["y"], strides=[2, 2],
                                          output_shape=[2, 3, 6, 6], pads=[0, 0, 1, 1])],
     "x", [("y", ["N", 3, 6, 6])], {"W": W}, x, full[:, :, 1:, 1:])
x = np.array([[1, np.nan, 3, -2], [np.nan, 0, 5, 7]], np.float32)
c = np.array([np.nan, 2, 1, np.nan], np.float32)
nn = (~np.isnan(np.maximum(x, c))).astype(np.float32)
save("max_nan", [h.make_node("Max", ["x", "c"], ["mx"]), h.make_node("Min", ["x", "c"], ["mn"]),
                 h.make_node("Equal", ["mx", "mx"], ["e1"]), h.make_node("Equal", ["mn", "mn"], ["e2"]),
                 h.make_node("Cast", ["e1"], ["f1"], to=T.FLOAT), h.make_node("Cast", ["e2"], ["f2"], to=T.FLOAT),
                 h.make_node("Add", ["f1", "f2"], ["y"])],
     "x", [("y", ["N", 4])], {"c": c}, x, 2 * nn)
save_bad("bad_attr_perm_int", h.make_node("Transpose", ["x"], ["y"], name="tr", perm=1), {})
save_bad("bad_attr_alpha_int", h.make_node("LeakyRelu", ["x"], ["y"], name="lrelu", alpha=1), {})
save_bad("bad_attr_axis_string", h.make_node("Softmax", ["x"], ["y"], name="sm", axis="0"), {})
x = rng.integers(0, 4, (3, 4)).astype(np.float32)
K = np.uint64(2 ** 63)
u = x.astype(np.uint64) + K
cs = np.array([1, 2, 3, 4], np.uint64)
cb = np.array([2 ** 63 + 1, 1, 2 ** 64 - 1, 2 ** 63 + 2], np.uint64)
U, F = T.UINT64, T.FLOAT
cols = [(u > cb), (u < cb), (np.maximum(u, cs) - K), np.minimum(u, cs), u // np.uint64(2 ** 62),
        u % np.uint64(10), np.clip(u, np.uint64(1), K + np.uint64(1)) - K, u.astype(np.float64) / 2.0 ** 63,
        ((x * 2.0 ** 60 + 2.0 ** 63).astype(np.uint64) - K).astype(np.float64) / 2.0 ** 60]
save("uint64_big",
     [h.make_node("Cast", ["x"], ["xu"], to=U), h.make_node("Add", ["xu", "K"], ["u"]),
      h.make_node("Greater", ["u", "cb"], ["gt"]), h.make_node("Less", ["u", "cb"], ["lt"]),
      h.make_node("Max", ["u", "cs"], ["mx"]), h.make_node("Sub", ["mx", "K"], ["mxk"]),
      h.make_node("Min", ["u", "cs"], ["mn"]), h.make_node("Div", ["u", "q"], ["dv"]),
      h.make_node("Mod", ["u", "ten"], ["md"]), h.make_node("Clip", ["u", "one", "K1"], ["cl"]),
      h.make_node("Sub", ["cl", "K"], ["clk"]), h.make_node("Cast", ["u"], ["uf"], to=F),
      h.make_node("Mul", ["uf", "r63"], ["ufs"]),
      h.make_node("Mul", ["x", "p60"], ["xp"]), h.make_node("Add", ["xp", "p63"], ["xb"]),
      h.make_node("Cast", ["xb"], ["xbu"], to=U), h.make_node("Sub", ["xbu", "K"], ["xbk"]),
      h.make_node("Cast", ["xbk"], ["xbf"], to=F), h.make_node("Mul", ["xbf", "r60"], ["fu"])]
     + [h.make_node("Cast", [a], [a + "f"], to=F) for a in ["gt", "lt", "mxk", "mn", "dv", "md", "clk"]]
     + [h.make_node("Concat", ["gtf", "ltf", "mxkf", "mnf", "dvf", "mdf", "clkf", "ufs", "fu"], ["y"], axis=1)],
     "x", [("y", ["N", 36])],
     {"K": np.array(K), "cb": cb, "cs": cs, "q": np.array(2 ** 62, np.uint64),
      "ten": np.array(10, np.uint64), "one": np.array(1, np.uint64), "K1": np.array(K + np.uint64(1)),
      "r63": np.array(2.0 ** -63, np.float32), "r60": np.array(2.0 ** -60, np.float32),
      "p60": np.array(2.0 ** 60, np.float32), "p63": np.array(2.0 ** 63, np.float32)},
     x, np.concatenate([c.astype(np.float64) for c in cols], 1))
x = np.array([[-7, 7, -7, 7], [5, -5, -4, 4], [-1, 1, 2, -2]], np.float32)
c = np.array([3, -3, 5, -5], np.int64)
save("int_fmod", [h.make_node("Cast", ["x"], ["xi"], to=T.INT64), h.make_node("Mod", ["xi", "c"], ["m"], fmod=1),
                  h.make_node("Cast", ["m"], ["y"], to=T.FLOAT)],
     "x", [("y", ["N", 4])], {"c": c}, x, np.fmod(x.astype(np.int64), c))
x = np.array([[np.nan, -1, 2, 30], [-20, np.nan, -0.5, 7]], np.float32)
hs = np.clip(0.2 * x.astype(np.float64) + 0.5, 0, 1)
hs[np.isnan(x)] = np.nan
rl = np.where(np.isnan(x), np.nan, np.maximum(x, 0))
save("act_nan", [h.make_node("HardSigmoid", ["x"], ["hs"]), h.make_node("Cast", ["x"], ["xd"], to=T.DOUBLE),
                 h.make_node("Relu", ["xd"], ["rd"]), h.make_node("Cast", ["rd"], ["rl"], to=T.FLOAT),
                 h.make_node("Equal", ["hs", "hs"], ["e1"]), h.make_node("Equal", ["rl", "rl"], ["e2"]),
                 h.make_node("Where", ["e1", "hs", "m7"], ["w1"]), h.make_node("Where", ["e2", "rl", "m7"], ["w2"]),
                 h.make_node("Concat", ["w1", "w2"], ["y"], axis=1)],
     "x", [("y", ["N", 8])], {"m7": np.array(-7, np.float32)}, x,
     np.concatenate([np.where(np.isnan(v), -7, v) for v in (hs, rl)], 1))
x = np.array([[np.nan, -1, 2, 3], [-2, 5, -0.5, 7], [4, 1, np.nan, -3]], np.float32)
red = [np.max(x, 1, keepdims=True), np.min(x, 1, keepdims=True)]
save("reduce_nan", [h.make_node("ReduceMax", ["x"], ["mx"], axes=[1]), h.make_node("ReduceMin", ["x"], ["mn"], axes=[1]),
                    h.make_node("Concat", ["mx", "mn"], ["r"], axis=1), h.make_node("Equal", ["r", "r"], ["e"]),
                    h.make_node("Where", ["e", "r", "m7"], ["y"])],
     "x", [("y", ["N", 2])], {"m7": np.array(-7, np.float32)}, x,
     np.where(np.isnan(np.concatenate(red, 1)), -7, np.concatenate(red, 1)))
