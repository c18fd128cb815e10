#!/usr/bin/python3
"""Build Vario's example pipeline "fashion scenes": canvases holding several
Fashion-MNIST items, three detector variants, measured accuracies.

    nice /usr/bin/python3 tools/zoo/train_fscenes.py            # train + export + evaluate
    /usr/bin/python3 tools/zoo/train_fscenes.py --eval-only      # re-evaluate the exports

A canvas is float32 [1, 84, 84] in [0, 1]: a 3x3 grid of 28x28 cells. Each
cell holds, independently, a Fashion-MNIST item (p = 0.5, pixel intensity
scaled by U[0.3, 1]), a distractor (p = 0.25: a Fashion-MNIST image whose
7x7 blocks are shuffled, same pixel statistics, no shape) or nothing; the
whole canvas gets Gaussian noise (sigma 0.06) and is clipped to [0, 1].
Training canvases use the 60,000 training images; the held-back validation
canvases (seeded, reproduced exactly by this script) use the 10,000 test
images, which no model of the pipeline was trained on.

A detector takes "input" [N,1,84,84] and returns, per cell (region r =
row * 3 + col):
    scores  [N, 9]     P(cell holds an item)                       (Sigmoid)
    labels  [N, 9, 2]  P(garment), P(footwear or bag) for the cell (Softmax)
Garments are Fashion-MNIST classes {0 T-shirt, 1 trouser, 2 pullover,
3 dress, 4 coat, 6 shirt}; footwear/bags are {5 sandal, 7 sneaker, 8 bag,
9 ankle boot}. The pipeline's grid_crop adapter sends the 28x28 cell of every
region with score > 0.5 to the child task of its label, where the existing
Fashion-MNIST family (models/fmnist, 10 classes) classifies it.

Writes models/pipelines/fashion_scenes/:
    fscenes_det_{tiny,small,large}/model.onnx + config.json
    sample.npy        float32 [8,1,84,84]: validation canvases 0..7
    sample_cells.npy  int64 [8,9]: their truth per cell (class 0..9, -1 none)
    eval.json         accuracy per variant, fan-out, end-to-end per path
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper  # noqa: F401  (onnx.numpy_helper)
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_onnx_numpy  # noqa: E402  (its conv/pool for the detector runner)
import train_fmnist  # noqa: E402  (IDX reader)

ROOT = train_fmnist.ROOT
OUT = os.path.join(ROOT, "models", "pipelines", "fashion_scenes")
SEED = 20261125
GRID, CELL = 3, 28
SIDE = GRID * CELL
FOOTWEAR_BAG = (5, 7, 8, 9)
THRESHOLD = 0.5
N_TRAIN, N_VAL = 8000, 1000
CHILDREN = ["fmnist_linear", "fmnist_mlp", "fmnist_cnn_s", "fmnist_cnn_bn",
            "fmnist_resnet"]
ALLOWED_OPS = train_fmnist.ALLOWED_OPS | {"Sigmoid", "Transpose", "Constant"}


def coarse(c):
    """Coarse label of a fine class: 0 garment, 1 footwear/bag."""
    return np.isin(c, FOOTWEAR_BAG).astype(np.int64)


def make_canvases(x, n, rng):
    """x: uint8 images [M,28,28]; returns canvases float32 [n,1,84,84] and
    the fine class index into x per cell ([n,9], -1 when no item)."""
    m = x.shape[0]
    canv = np.zeros((n, SIDE, SIDE), np.float32)
    item = np.full((n, GRID * GRID), -1, np.int64)
    kind = rng.random((n, GRID * GRID))
    pick = rng.integers(0, m, (n, GRID * GRID))
    scale = rng.uniform(0.3, 1.0, (n, GRID * GRID)).astype(np.float32)
    for i in range(n):
        for r in range(GRID * GRID):
            if kind[i, r] >= 0.75:
                continue
            img = x[pick[i, r]].astype(np.float32) / 255.0
            if kind[i, r] < 0.5:
                item[i, r] = pick[i, r]
            else:  # distractor: shuffle the 16 blocks of 7x7
                b = img.reshape(4, 7, 4, 7).transpose(0, 2, 1, 3).reshape(16, 7, 7)
                b = b[rng.permutation(16)]
                img = b.reshape(4, 4, 7, 7).transpose(0, 2, 1, 3).reshape(28, 28)
            y0, x0 = (r // GRID) * CELL, (r % GRID) * CELL
            canv[i, y0:y0 + CELL, x0:x0 + CELL] = img * scale[i, r]
    canv += rng.normal(0, 0.06, canv.shape).astype(np.float32)
    np.clip(canv, 0, 1, out=canv)
    return canv[:, None], item


class Detector(nn.Module):
    """Backbone to a 3x3 feature map (one cell each), two 1x1 heads."""

    def __init__(self, backbone, ch):
        super().__init__()
        self.backbone = backbone
        self.obj = nn.Conv2d(ch, 1, 1)
        self.cls = nn.Conv2d(ch, 2, 1)

    def logits(self, x):
        f = self.backbone(x)
        return self.obj(f).flatten(1), self.cls(f).view(-1, 2, GRID * GRID).transpose(1, 2)

    def forward(self, x):
        o, c = self.logits(x)
        return torch.sigmoid(o), torch.softmax(c, dim=-1)


def downsample(k):
    """k x k mean pooling as a fixed strided convolution (torch exports
    AvgPool2d with a Pad the engine does not run)."""
    c = nn.Conv2d(1, 1, k, stride=k, bias=False)
    nn.init.constant_(c.weight, 1.0 / (k * k))
    c.weight.requires_grad_(False)
    return c


def build(name):
    """Three detectors of rising cost: tiny sees each cell as a 7x7
    thumbnail (one linear filter per cell), small a 42x42 canvas, large
    the full resolution."""
    if name == "fscenes_det_tiny":
        return Detector(nn.Sequential(
            downsample(4),                                       # 21x21
            nn.Conv2d(1, 4, 7, stride=7), nn.ReLU()), 4)         # 3x3
    if name == "fscenes_det_small":
        return Detector(nn.Sequential(
            downsample(2),                                       # 42x42
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),                                     # 21x21
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(7)), 16)                                # 3x3
    if name == "fscenes_det_large":
        return Detector(nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),   # 42x42
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),                                       # 21x21
            nn.Conv2d(32, 48, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(7),                                       # 3x3
            nn.Conv2d(48, 48, 1), nn.ReLU()), 48)
    raise ValueError(name)


NAMES = ["fscenes_det_tiny", "fscenes_det_small", "fscenes_det_large"]
EPOCHS = {"fscenes_det_tiny": 4, "fscenes_det_small": 6, "fscenes_det_large": 5}


def train(name, xtr, ttr, fine_tr):
    torch.manual_seed(SEED)
    model = build(name)
    obj_t = torch.from_numpy((ttr >= 0).astype(np.float32))
    cls_t = torch.from_numpy(coarse(np.where(ttr >= 0, fine_tr[np.maximum(ttr, 0)], 0)))
    x = torch.from_numpy(xtr)
    bs, ep = 64, EPOCHS[name]
    steps = (x.shape[0] // bs) * ep
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps,
                                                pct_start=0.2)
    gen = torch.Generator().manual_seed(SEED)
    t0 = time.time()
    for e in range(ep):
        model.train()
        perm = torch.randperm(x.shape[0], generator=gen)
        tot = 0.0
        for i in range(0, x.shape[0] - bs + 1, bs):
            idx = perm[i:i + bs]
            o, c = model.logits(x[idx])
            m = obj_t[idx]
            loss = F.binary_cross_entropy_with_logits(o, m)
            ce = F.cross_entropy(c.reshape(-1, 2), cls_t[idx].reshape(-1), reduction="none")
            loss = loss + (ce * m.reshape(-1)).sum() / m.sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item() * bs
        print(f"  {name} epoch {e + 1}/{ep}: loss {tot / x.shape[0]:.4f} "
              f"({time.time() - t0:.0f} s)", flush=True)
    model.eval()
    return model, time.time() - t0


def export(name, model, path):
    torch.onnx.export(model, torch.zeros(1, 1, SIDE, SIDE), path, opset_version=13,
                      input_names=["input"], output_names=["scores", "labels"],
                      dynamic_axes={"input": {0: "batch"}, "scores": {0: "batch"},
                                    "labels": {0: "batch"}},
                      do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = sorted({n.op_type for n in m.graph.node})
    bad = set(ops) - ALLOWED_OPS
    if bad:
        raise RuntimeError(f"{name}: ops outside the engine list: {bad}")
    return ops


def pct(fraction):
    """Vario states every accuracy as a percent (docs/API.md, Conventions)."""
    return 100.0 * float(fraction)


def detector_metrics(scores, labels, truth):
    """truth: [N,9] fine class or -1. Per-cell 3-way accuracy (none /
    garment / footwear-bag), recall, precision, fan-out per canvas."""
    det = scores > THRESHOLD
    lab = labels.argmax(-1)
    has = truth >= 0
    tc = coarse(np.maximum(truth, 0))
    pred3 = np.where(det, lab + 1, 0)
    true3 = np.where(has, tc + 1, 0)
    return {
        "cell_accuracy": pct((pred3 == true3).mean()),
        "recall": pct((det & has).sum() / has.sum()),
        "precision": pct((det & has).sum() / max(det.sum(), 1)),
        "label_accuracy_on_hits": pct((lab == tc)[det & has].mean()),
        "fanout_per_canvas": float(det.sum(1).mean()),
        "fanout_garment": float((det & (lab == 0)).sum(1).mean()),
        "fanout_footwear_bag": float((det & (lab == 1)).sum(1).mean()),
    }


def crops_of(canv):
    """[N,1,84,84] -> [N*9,1,28,28], region r = row*3+col."""
    n = canv.shape[0]
    c = canv.reshape(n, GRID, CELL, GRID, CELL).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(c.reshape(n * GRID * GRID, 1, CELL, CELL))


def child_predictions(crops, vario):
    """Arg-max class of every Fashion-MNIST model on the crops, run by
    Vario's own engine (`vario run`, fp32), which serves them."""
    import subprocess
    import tempfile
    pred = {}
    with tempfile.TemporaryDirectory() as d:
        for m in CHILDREN:
            parts = []
            for i in range(0, crops.shape[0], 500):  # vario run's batch limit
                x, y = os.path.join(d, "crops.npy"), os.path.join(d, "out.npy")
                np.save(x, np.ascontiguousarray(crops[i:i + 500], dtype=np.float32))
                subprocess.run([vario, "run", os.path.join(ROOT, "models", "fmnist", m,
                                                           "model.onnx"),
                                "--input", x, "--output", y], check=True,
                               stdout=subprocess.DEVNULL)
                parts.append(np.load(y).argmax(1))
            pred[m] = np.concatenate(parts)
    return pred


def evaluate(xval, truth, dets, vario):
    """End-to-end accuracy per path (detector variant, edge, child model):
    over the true items of the edge's class, the share (percent) the detector finds
    with the right label and the child then classifies correctly."""
    has = (truth >= 0).reshape(-1)
    tc = coarse(np.maximum(truth, 0)).reshape(-1)
    fine = truth.reshape(-1)
    items = np.flatnonzero(has)
    pred_items = child_predictions(crops_of(xval)[items], vario)
    child_pred, child_acc = {}, {}
    for m in CHILDREN:
        child_pred[m] = np.full(fine.shape, -1)
        child_pred[m][items] = pred_items[m]
        child_acc[m] = pct((child_pred[m] == fine)[has].mean())
        print(f"  child {m}: accuracy on item crops {child_acc[m]:.2f}%", flush=True)
    out = {"children_on_crops": child_acc, "detectors": {}, "paths": []}
    for d, (sc, lb) in dets.items():
        out["detectors"][d] = detector_metrics(sc, lb, truth)
        det = (sc > THRESHOLD).reshape(-1)
        lab = lb.argmax(-1).reshape(-1)
        for e, ename in enumerate(["garment", "footwear_bag"]):
            items_e = has & (tc == e)
            for m in CHILDREN:
                ok = items_e & det & (lab == e) & (child_pred[m] == fine)
                out["paths"].append({"detector": d, "edge": ename, "child": m,
                                     "accuracy": pct(ok.sum() / items_e.sum())})
    return out


def data(seed, split, n):
    x = train_fmnist.read_idx(os.path.join(train_fmnist.DATA_DIR,
                                           f"{split}-images-idx3-ubyte.gz"))
    y = train_fmnist.read_idx(os.path.join(train_fmnist.DATA_DIR,
                                           f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    canv, idx = make_canvases(x, n, np.random.default_rng(seed))
    return canv, idx, y


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--vario", default=os.path.join(ROOT, "build", "vario"),
                    help="the vario binary that runs the children (default build/vario)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    xval, ival, yval = data(SEED + 1, "t10k", N_VAL)
    truth = np.where(ival >= 0, yval[np.maximum(ival, 0)], -1)
    os.makedirs(OUT, exist_ok=True)
    logs = {}
    if not args.eval_only:
        xtr, itr, ytr = data(SEED, "train", N_TRAIN)
        for name in NAMES:
            model, secs = train(name, xtr, itr, ytr)
            d = os.path.join(OUT, name)
            os.makedirs(d, exist_ok=True)
            ops = export(name, model, os.path.join(d, "model.onnx"))
            logs[name] = {"train_seconds": round(secs, 1), "epochs": EPOCHS[name],
                          "params": sum(p.numel() for p in model.parameters()),
                          "onnx_ops": ops}
        np.save(os.path.join(OUT, "sample.npy"), np.ascontiguousarray(xval[:8]))
        np.save(os.path.join(OUT, "sample_cells.npy"), np.ascontiguousarray(truth[:8]))
    dets = {}
    for name in NAMES:
        dets[name] = run_detector(onnx.load(os.path.join(OUT, name, "model.onnx")), xval)
    ev = evaluate(xval, truth, dets, args.vario)
    for name in NAMES:
        dm = ev["detectors"][name]
        cfg_path = os.path.join(OUT, name, "config.json")
        old = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
        cfg = {
            "name": name, "app": "fscenes_detect", "task": "detection",
            "accuracy": round(dm["cell_accuracy"], 2),  # percent
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 1, SIDE, SIDE]}],
            "outputs": [{"name": "scores", "datatype": "FP32", "shape": [-1, 9]},
                        {"name": "labels", "datatype": "FP32", "shape": [-1, 9, 2]}],
            "max_batch_size": 64, "instances": 1, "threads": 1, "precision": "fp32",
            "max_queue_delay_us": 0,
            "params": logs.get(name, old).get("params"),
            "train_seconds": logs.get(name, old).get("train_seconds"),
            "epochs": logs.get(name, old).get("epochs"),
            "onnx_ops": logs.get(name, old).get("onnx_ops"),
        }
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
    ev["validation"] = {"canvases": N_VAL, "seed": SEED + 1, "threshold": THRESHOLD,
                        "items": int((truth >= 0).sum())}
    with open(os.path.join(OUT, "eval.json"), "w") as f:
        json.dump(ev, f, indent=1)
        f.write("\n")
    table(ev)


def run_detector(model, x):
    """The detector graphs: Conv/Relu/MaxPool/AveragePool/Flatten/Reshape from the
    children's interpreter plus Sigmoid, Transpose, Softmax."""
    env = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    env = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in env.items()}
    env[model.graph.input[0].name] = x.astype(np.float64)
    for node in model.graph.node:
        a = check_onnx_numpy.attrs(node)
        i = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "Conv":
            y = check_onnx_numpy.conv(i[0], i[1], i[2] if len(i) > 2 else None, a)
        elif op == "Relu":
            y = np.maximum(i[0], 0)
        elif op == "MaxPool":
            y = check_onnx_numpy.pool(i[0], a, "max")
        elif op == "AveragePool":
            y = check_onnx_numpy.pool(i[0], a, "avg")
        elif op == "Flatten":
            y = i[0].reshape(i[0].shape[0], -1)
        elif op == "Reshape":
            shp = [d if d != 0 else i[0].shape[k] for k, d in enumerate(i[1])]
            y = i[0].reshape(shp)
        elif op == "Transpose":
            y = i[0].transpose(a["perm"])
        elif op == "Sigmoid":
            y = 1 / (1 + np.exp(-i[0]))
        elif op == "Softmax":
            z = np.exp(i[0] - i[0].max(axis=a.get("axis", -1), keepdims=True))
            y = z / z.sum(axis=a.get("axis", -1), keepdims=True)
        elif op == "Constant":
            y = onnx.numpy_helper.to_array(node.attribute[0].t)
        else:
            raise NotImplementedError(op)
        env[node.output[0]] = y
    outs = [o.name for o in model.graph.output]
    return env[outs[0]], env[outs[1]]


def table(ev):
    print("| detector | cell accuracy | recall | precision | fan-out/canvas | garment | footwear/bag |")
    print("|---|---|---|---|---|---|---|")
    for d, m in ev["detectors"].items():
        print(f"| {d} | {m['cell_accuracy']:.2f}% | {m['recall']:.1f}% | "
              f"{m['precision']:.1f}% | {m['fanout_per_canvas']:.3f} | "
              f"{m['fanout_garment']:.3f} | {m['fanout_footwear_bag']:.3f} |")
    print()
    print("| detector | edge | " + " | ".join(CHILDREN) + " |")
    print("|---|---|" + "---|" * len(CHILDREN))
    for d in ev["detectors"]:
        for e in ["garment", "footwear_bag"]:
            row = [p["accuracy"] for p in ev["paths"] if p["detector"] == d and p["edge"] == e]
            print(f"| {d} | {e} | " + " | ".join(f"{a:.2f}%" for a in row) + " |")


if __name__ == "__main__":
    main()
