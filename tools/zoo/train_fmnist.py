#!/usr/bin/python3
"""Train, evaluate and export Vario's Fashion-MNIST model family.

    /usr/bin/python3 tools/zoo/train_fmnist.py                  # whole family
    /usr/bin/python3 tools/zoo/train_fmnist.py --only fmnist_mlp
    /usr/bin/python3 tools/zoo/train_fmnist.py --epochs 1 --only fmnist_resnet
    /usr/bin/python3 tools/zoo/train_fmnist.py --table          # markdown table

Reads the gzipped IDX files of Debian's dataset-fashion-mnist package itself
(nothing is downloaded), trains with a fixed seed on 2 threads, and writes

    models/fmnist/<name>/model.onnx      opset 13, input "input" [N,1,28,28]
                                         float32 in [0,1], output "logits" [N,10]
    models/fmnist/<name>/config.json     Vario model-repository config
    models/fmnist-data/val_inputs.npy    first 1000 test images, float32
    models/fmnist-data/val_labels.npy    their labels, int64
    models/fmnist-data/calib_inputs.npy  256 training images (int8 calibration)
    models/fmnist-data/ref/<name>.npy    PyTorch fp32 logits of val rows 0..63

Accuracy is top-1 on the full 10,000-image test set. Latency is PyTorch CPU,
batch 1, 1 thread, median of timed runs after warm-up.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fmnist_models  # noqa: E402

DATA_DIR = "/usr/share/datasets/fashion-mnist"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SEED = 20261122
ALLOWED_OPS = {"Conv", "Gemm", "MatMul", "Relu", "MaxPool", "AveragePool",
               "GlobalAveragePool", "BatchNormalization", "Add", "Flatten",
               "Reshape", "Concat", "Softmax", "Dropout", "Clip"}

# Per-model training recipe. Epoch counts were chosen after timing one epoch
# of each model on the 2-core development machine (see tools/zoo/README.md).
RECIPES = {
    "fmnist_linear": dict(epochs=10, opt="adam", lr=5e-3, wd=0.0, aug=False,
                          smooth=0.0, bs=128),
    "fmnist_mlp":    dict(epochs=10, opt="adam", lr=1e-3, wd=1e-4, aug=False,
                          smooth=0.0, bs=128),
    "fmnist_cnn_s":  dict(epochs=6, opt="adam", lr=2e-3, wd=1e-4, aug=False,
                          smooth=0.0, bs=128),
    "fmnist_cnn_bn": dict(epochs=8, opt="sgd", lr=0.1, wd=5e-4, aug=False,
                          smooth=0.0, bs=128),
    "fmnist_resnet": dict(epochs=15, opt="sgd", lr=0.1, wd=5e-4, aug=True,
                          smooth=0.1, bs=128),
}


def read_idx(path):
    """Minimal IDX reader (ubyte images / labels)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: size {arr.size} does not match {dims}")
    return arr.reshape(dims)


def load_split(prefix):
    x = read_idx(os.path.join(DATA_DIR, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(DATA_DIR, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(y.astype(np.int64))
    return x, y


def augment(x, gen):
    """Random crop 28x28 from the 2-pixel zero-padded image + random
    horizontal flip, independently per sample."""
    n = x.shape[0]
    p = F.pad(x, (2, 2, 2, 2))
    dy = torch.randint(0, 5, (n,), generator=gen)
    dx = torch.randint(0, 5, (n,), generator=gen)
    ar = torch.arange(28)
    rows = (dy[:, None] + ar[None, :])[:, :, None]
    cols = (dx[:, None] + ar[None, :])[:, None, :]
    out = p[torch.arange(n)[:, None, None], 0, rows, cols].unsqueeze(1)
    flip = torch.rand(n, generator=gen) < 0.5
    out[flip] = out[flip].flip(3)
    return out


@torch.inference_mode()
def evaluate(model, x, y, bs=1000):
    model.eval()
    correct = 0
    for i in range(0, x.shape[0], bs):
        correct += (model(x[i:i + bs]).argmax(1) == y[i:i + bs]).sum().item()
    return correct / x.shape[0]


def train(name, model, xtr, ytr, xte, yte, epochs_override=None):
    r = dict(RECIPES[name])
    if epochs_override is not None:
        r["epochs"] = epochs_override
    gen = torch.Generator().manual_seed(SEED)
    n = xtr.shape[0]
    steps = (n // r["bs"]) * r["epochs"]
    if r["opt"] == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=r["lr"], momentum=0.9,
                              nesterov=True, weight_decay=r["wd"])
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=r["lr"],
                                weight_decay=r["wd"])
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=r["lr"], total_steps=steps, pct_start=0.25)
    t_start = time.time()
    for ep in range(r["epochs"]):
        model.train()
        t0 = time.time()
        perm = torch.randperm(n, generator=gen)
        tot_loss = 0.0
        for i in range(0, n - r["bs"] + 1, r["bs"]):
            idx = perm[i:i + r["bs"]]
            xb, yb = xtr[idx], ytr[idx]
            if r["aug"]:
                xb = augment(xb, gen)
            loss = F.cross_entropy(model(xb), yb, label_smoothing=r["smooth"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            tot_loss += loss.item() * r["bs"]
        acc = evaluate(model, xte, yte)
        print(f"  {name} epoch {ep + 1}/{r['epochs']}: loss "
              f"{tot_loss / n:.4f} test acc {acc:.4f} ({time.time() - t0:.1f} s)",
              flush=True)
    return time.time() - t_start, r


@torch.inference_mode()
def torch_latency_ms(model, iters=300):
    """Median batch-1 latency, 1 thread, after warm-up."""
    model.eval()
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    x = torch.rand(1, 1, 28, 28)
    for _ in range(50):
        model(x)
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        model(x)
        ts.append(time.perf_counter() - t0)
    torch.set_num_threads(old)
    return float(np.median(ts) * 1e3)


def export(name, model, path):
    import onnx
    model.eval()
    torch.onnx.export(
        model, torch.zeros(1, 1, 28, 28), path, opset_version=13,
        input_names=["input"], output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = {n.op_type for n in m.graph.node}
    bad = ops - ALLOWED_OPS
    if bad:
        raise RuntimeError(f"{name}: exported ops outside the engine list: {bad}")
    return sorted(ops)


def write_data(xtr, xte, yte):
    d = os.path.join(ROOT, "models", "fmnist-data")
    os.makedirs(os.path.join(d, "ref"), exist_ok=True)
    np.save(os.path.join(d, "val_inputs.npy"),
            np.ascontiguousarray(xte[:1000].numpy(), dtype=np.float32))
    np.save(os.path.join(d, "val_labels.npy"),
            np.ascontiguousarray(yte[:1000].numpy(), dtype=np.int64))
    g = torch.Generator().manual_seed(SEED + 1)
    idx = torch.randperm(xtr.shape[0], generator=g)[:256].sort().values
    np.save(os.path.join(d, "calib_inputs.npy"),
            np.ascontiguousarray(xtr[idx].numpy(), dtype=np.float32))
    return d


def run_one(name, xtr, ytr, xte, yte, data_dir, epochs):
    print(f"== {name}", flush=True)
    torch.manual_seed(SEED)
    model = fmnist_models.build(name)
    secs, recipe = train(name, model, xtr, ytr, xte, yte, epochs)
    model.eval()
    acc = evaluate(model, xte, yte)
    params = sum(p.numel() for p in model.parameters())
    flops = fmnist_models.count_flops(model)
    lat = torch_latency_ms(model)
    out = os.path.join(ROOT, "models", "fmnist", name)
    os.makedirs(out, exist_ok=True)
    ops = export(name, model, os.path.join(out, "model.onnx"))
    with torch.inference_mode():
        ref = model(xte[:64]).numpy().astype(np.float32)
    np.save(os.path.join(data_dir, "ref", f"{name}.npy"), ref)
    cfg = {
        "name": name, "app": "fashion", "task": "classification",
        "accuracy": round(100 * acc, 2),  # percent
        "inputs": [{"name": "input", "datatype": "FP32",
                    "shape": [-1, 1, 28, 28]}],
        "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}],
        "max_batch_size": 64, "instances": 1, "threads": 1,
        "precision": "fp32", "max_queue_delay_us": 0,
        "params": params, "flops": flops,
        "torch_latency_ms_b1": round(lat, 4),
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    # Training record (not read by Vario): recipe, time, ops.
    with open(os.path.join(out, "train_log.json"), "w") as f:
        json.dump({"seed": SEED, "recipe": recipe,
                   "threads": torch.get_num_threads(),
                   "train_seconds": round(secs, 1), "onnx_ops": ops,
                   "torch_version": torch.__version__}, f, indent=2)
        f.write("\n")
    print(f"== {name}: acc {acc:.4f} params {params} flops {flops} "
          f"torch b1 {lat:.4f} ms, trained in {secs:.0f} s, ops {ops}",
          flush=True)


def table():
    print("| model | test accuracy | params | FLOPs/sample | PyTorch b1 1T (ms) | epochs | train time | ONNX ops |")
    print("|---|---|---|---|---|---|---|---|")
    for name in fmnist_models.NAMES:
        d = os.path.join(ROOT, "models", "fmnist", name)
        try:
            cfg = json.load(open(os.path.join(d, "config.json")))
            log = json.load(open(os.path.join(d, "train_log.json")))
        except FileNotFoundError:
            print(f"| {name} | (not trained) | | | | | | |")
            continue
        print(f"| {name} | {cfg['accuracy']:.2f}% | {cfg['params']:,} | "
              f"{cfg['flops'] / 1e6:.2f} M | {cfg['torch_latency_ms_b1']:.3f} | "
              f"{log['recipe']['epochs']} | {log['train_seconds']:.0f} s "
              f"({log.get('threads', 2)}T) | {', '.join(log['onnx_ops'])} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", action="append", choices=fmnist_models.NAMES,
                    help="train only this model (repeatable)")
    ap.add_argument("--epochs", type=int, help="override the recipe's epochs")
    ap.add_argument("--threads", type=int, default=2,
                    help="training threads (default 2; 1 is faster when "
                    "other jobs load the machine)")
    ap.add_argument("--table", action="store_true",
                    help="print the markdown table of the exported models")
    args = ap.parse_args()
    if args.table:
        table()
        return
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    xtr, ytr = load_split("train")
    xte, yte = load_split("t10k")
    data_dir = write_data(xtr, xte, yte)
    for name in args.only or fmnist_models.NAMES:
        run_one(name, xtr, ytr, xte, yte, data_dir, args.epochs)


if __name__ == "__main__":
    main()
