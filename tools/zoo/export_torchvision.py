#!/usr/bin/python3
"""Export torchvision ImageNet architectures (random weights) to ONNX.

    /usr/bin/python3 tools/zoo/export_torchvision.py [--out models/zoo] [names...]

Default: all of NAMES. Nothing is downloaded: every model is built with
weights=None and seeded random initialisation; the "accuracy" recorded in
config.json is the published ImageNet-1K top-1 of torchvision's IMAGENET1K_V1
weights (read from torchvision's own weight metadata), marked as declared.
Latency and FLOPs do not depend on the weight values.

Writes, per model, into OUT/<name>/ (git-ignored, never committed):
    model.onnx       eval mode, input "input" [N,3,224,224] (inception_v3:
                     299x299), output "logits" [N,1000], dynamic batch,
                     opset 13 (the first of 13..17 that exports cleanly)
    config.json      Vario model-repository config
    ref_input.npy    float32 [2,3,H,W], torch.randn with a fixed seed
    ref_output.npy   PyTorch fp32 logits for ref_input.npy
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torchvision.models as tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flops import count_flops  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SEED = 20261122

# name -> (torchvision weights enum name, extra constructor kwargs, image size)
MODELS = {
    "resnet18": ("ResNet18_Weights", {}, 224),
    "resnet50": ("ResNet50_Weights", {}, 224),
    "mobilenet_v2": ("MobileNet_V2_Weights", {}, 224),
    "mobilenet_v3_large": ("MobileNet_V3_Large_Weights", {}, 224),
    "efficientnet_b0": ("EfficientNet_B0_Weights", {}, 224),
    "vgg16": ("VGG16_Weights", {}, 224),
    "densenet121": ("DenseNet121_Weights", {}, 224),
    "squeezenet1_1": ("SqueezeNet1_1_Weights", {}, 224),
    "shufflenet_v2_x1_0": ("ShuffleNet_V2_X1_0_Weights", {}, 224),
    "inception_v3": ("Inception_V3_Weights",
                     {"aux_logits": False, "init_weights": True}, 299),
    "googlenet": ("GoogLeNet_Weights",
                  {"aux_logits": False, "init_weights": True}, 224),
    "alexnet": ("AlexNet_Weights", {}, 224),
    "vit_b_16": ("ViT_B_16_Weights", {}, 224),
}
NAMES = list(MODELS)


def build(name, seed=SEED):
    """The architecture with seeded random weights, in eval mode."""
    _, kwargs, _ = MODELS[name]
    torch.manual_seed(seed)
    model = getattr(tvm, name)(weights=None, **kwargs)
    return model.eval()


def input_shape(name, batch):
    size = MODELS[name][2]
    return (batch, 3, size, size)


def declared_top1(name):
    w = getattr(tvm, MODELS[name][0]).IMAGENET1K_V1
    return w.meta["_metrics"]["ImageNet-1K"]["acc@1"]  # percent, as config.json


def export_one(name, out_root, opsets=(13, 14, 15, 16, 17)):
    import onnx
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.onnx")
    model = build(name)
    shape = input_shape(name, 1)
    t0 = time.time()
    err = None
    for opset in opsets:
        try:
            torch.onnx.export(
                model, torch.zeros(shape), path, opset_version=opset,
                input_names=["input"], output_names=["logits"],
                dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                do_constant_folding=True)
            onnx.checker.check_model(path)  # path form: works above 2 GB too
            err = None
            break
        except Exception as e:  # try the next opset
            err = e
            print(f"  {name}: opset {opset} failed: {e}", flush=True)
    if err is not None:
        raise RuntimeError(f"{name}: no opset in {opsets} exported") from err
    export_s = time.time() - t0
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(input_shape(name, 2), generator=g)
    with torch.inference_mode():
        y = model(x)
    np.save(os.path.join(out, "ref_input.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(out, "ref_output.npy"), y.numpy().astype(np.float32))
    m = onnx.load(path, load_external_data=False)
    ops = sorted({n.op_type for n in m.graph.node})
    cfg = {
        "name": name, "app": "imagenet", "task": "classification",
        "accuracy": round(declared_top1(name), 3),
        "accuracy_source": "declared (torchvision published top-1)",
        "inputs": [{"name": "input", "datatype": "FP32",
                    "shape": [-1] + list(shape[1:])}],
        "outputs": [{"name": "logits", "datatype": "FP32",
                     "shape": [-1, 1000]}],
        "max_batch_size": 64, "instances": 1, "threads": 1,
        "precision": "fp32", "max_queue_delay_us": 0,
        "params": sum(p.numel() for p in model.parameters()),
        "flops": count_flops(model, shape),
        "opset": opset, "onnx_ops": ops,
        "weights": "random (torch.manual_seed(%d)), not trained" % SEED,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    mb = os.path.getsize(path) / 2**20
    print(f"{name}: opset {opset}, {mb:.1f} MB, {cfg['params']:,} params, "
          f"{cfg['flops'] / 1e9:.2f} GFLOP/sample, exported in {export_s:.1f} s,"
          f" ops {ops}", flush=True)


def table(out_root):
    print("| model | input | params | GFLOP/sample | declared top-1 | opset | model.onnx |")
    print("|---|---|---|---|---|---|---|")
    for name in NAMES:
        try:
            cfg = json.load(open(os.path.join(out_root, name, "config.json")))
        except FileNotFoundError:
            print(f"| {name} | (not exported) | | | | | |")
            continue
        mb = os.path.getsize(os.path.join(out_root, name, "model.onnx")) / 2**20
        shp = "x".join(str(d) for d in cfg["inputs"][0]["shape"][1:])
        print(f"| {name} | {shp} | {cfg['params'] / 1e6:.2f} M | "
              f"{cfg['flops'] / 1e9:.2f} | {cfg['accuracy']:.2f}% | "
              f"{cfg['opset']} | {mb:.0f} MB |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "zoo"))
    ap.add_argument("--table", action="store_true",
                    help="print a markdown table of the exported models")
    ap.add_argument("names", nargs="*", help=f"default: all of {NAMES}")
    args = ap.parse_args()
    if args.table:
        table(args.out)
        return
    bad = [n for n in args.names if n not in MODELS]
    if bad:
        ap.error(f"unknown model(s) {bad}; choose from {NAMES}")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    failed = []
    for name in args.names or NAMES:
        try:
            export_one(name, args.out)
        except Exception as e:
            print(f"{name}: FAILED: {e}", file=sys.stderr, flush=True)
            failed.append(name)
    if failed:
        sys.exit(f"export failed for {failed}")


if __name__ == "__main__":
    main()
