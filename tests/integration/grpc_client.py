#!/usr/bin/python3
"""KServe v2 gRPC on the real server, driven by a real gRPC client (Debian's
python3-grpcio; messages compiled from Vario's proto by Debian's protoc, not
by the server's code): ServerLive/Ready/Metadata, ModelReady/Metadata,
ModelInfer with raw_input_contents (and typed contents, classification,
refused parameters), ModelConfig, ModelStatistics, RepositoryIndex and
RepositoryModelLoad/Unload, HTTP and gRPC answering the same model alike, and
SIGTERM with hundreds of gRPC calls in flight.

usage: grpc_client.py VARIO SOURCE_DIR   (exit 77 = skipped: no grpcio/protoc)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

VARIO, SRC = sys.argv[1], sys.argv[2]
TOKEN = "grpc-" + os.urandom(8).hex()  # repository calls need it (docs/SECURITY.md)
try:
    import grpc
except ImportError:
    print("skip: python3-grpcio missing (scripts/setup-deps.sh check installs it)")
    sys.exit(77)
if not shutil.which("protoc"):
    print("skip: protoc missing (scripts/setup-deps.sh check installs it)")
    sys.exit(77)

TMP = tempfile.mkdtemp(prefix="vr_grpc_")
subprocess.run(["protoc", "--python_out", TMP, "-I", os.path.join(SRC, "src/server/proto"),
                "grpc_service.proto"], check=True)
sys.path.insert(0, TMP)
import grpc_service_pb2 as pb  # noqa: E402

DATA = os.path.join(SRC, "models/fmnist-data")
REPO = os.path.join(TMP, "repo")


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def main():
    for m in ("fmnist_mlp", "fmnist_cnn_s"):
        shutil.copytree(os.path.join(SRC, "models/fmnist", m), os.path.join(REPO, m))
    log = open(os.path.join(TMP, "serve.log"), "w+")
    p = subprocess.Popen([VARIO, "serve", "--repo", REPO, "--port", "0"], stdout=log, stderr=log,
                         env=dict(os.environ, VARIO_ADMIN_TOKEN=TOKEN))
    try:
        run(p, log)
    finally:
        p.terminate()
        p.wait(timeout=30)
    log.seek(0)
    out = log.read()
    check("stopped" in out and p.returncode == 0 and "Sanitizer" not in out,
          f"server stops cleanly with gRPC clients connected (exit {p.returncode})")
    shutdown_rounds()
    tls_round()
    silent_round()
    stalled_round()
    shutil.rmtree(TMP, ignore_errors=True)
    print("grpc: all checks passed")


def start(args, name):
    """A server on free ports: (process, log, HTTP port, gRPC port)."""
    log = open(os.path.join(TMP, name), "w+")
    p = subprocess.Popen([VARIO, "serve", "--repo", REPO, "--port", "0"] + args, stdout=log,
                         stderr=log, env=dict(os.environ, VARIO_ADMIN_TOKEN=TOKEN))
    for _ in range(600):
        log.seek(0)
        m = re.search(r"listening on https?://[0-9.]+:(\d+).*gRPC port (\d+)", log.read())
        if m:
            return p, log, int(m.group(1)), int(m.group(2))
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    check(False, f"{name}: server up")


def silent_round():
    """A connection that never completes its handshake is closed after
    --header-timeout-ms, as an HTTP one without its headers (gRPC held it
    120 s: a flood of them took the descriptors both ports share)."""
    import socket
    p, log, _, gport = start(["--header-timeout-ms", "1000"], "silent.log")
    try:
        sk = socket.create_connection(("127.0.0.1", gport), timeout=10)
        t0 = time.time()
        closed = False
        try:  # the server may greet first (its SETTINGS): read to the end
            while sk.recv(4096):
                pass
            closed = True
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            pass
        took = time.time() - t0
        sk.close()
        check(closed and took < 8, f"a silent gRPC connection is closed ({took:.1f} s)")
    finally:
        p.terminate()
        p.wait(timeout=30)


def stalled_round():
    """A call whose request message never all comes is ended after
    --body-timeout-ms, as an HTTP body that never completes (gRPC waited
    for it for ever: the call, and its connection, never idle, were held
    for good). Raw HTTP/2: headers, then 3 bytes of a 100-byte message."""
    import socket
    import struct

    def frame(kind, flags, sid, payload=b""):
        return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
            struct.pack(">I", sid) + payload

    def literal(name, value):  # HPACK, not indexed, no Huffman
        return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + \
            value.encode()
    head = b"".join(literal(k, v) for k, v in [
        (":method", "POST"), (":scheme", "http"), (":authority", "x"),
        (":path", "/inference.GRPCInferenceService/ModelInfer"),
        ("content-type", "application/grpc"), ("te", "trailers")])
    p, log, _, gport = start(["--body-timeout-ms", "1000"], "stalled.log")
    try:
        sk = socket.create_connection(("127.0.0.1", gport), timeout=10)
        sk.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0) + frame(4, 1, 0) +
                   frame(1, 4, 1, head) + frame(0, 0, 1, b"\x00" + struct.pack(">I", 100) + b"abc"))
        t0, buf, ended = time.time(), b"", False
        while not ended and time.time() - t0 < 8:
            try:
                d = sk.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            buf += d
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n, kind, flags, sid = int.from_bytes(buf[:3], "big"), buf[3], buf[4], \
                    int.from_bytes(buf[5:9], "big") & 0x7fffffff
                # stream 1 reset, or its trailers (HEADERS with END_STREAM)
                ended |= sid == 1 and (kind == 3 or (kind == 1 and flags & 1))
                buf = buf[9 + n:]
        took = time.time() - t0
        sk.close()
        check(ended and took < 8, f"a gRPC call whose message never completes is ended ({took:.1f} s)")
    finally:
        p.terminate()
        p.wait(timeout=30)


def tls_round():
    """With --tls-cert/--tls-key the gRPC port speaks TLS with the same
    certificate: it served plaintext beside HTTPS, bearer token included."""
    if not shutil.which("openssl"):
        print("skip: TLS round (no openssl)")
        return
    key, cert = os.path.join(TMP, "key.pem"), os.path.join(TMP, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    p, log, _, gport = start(["--tls-cert", cert, "--tls-key", key], "tls.log")
    try:
        def live(ch):
            f = ch.unary_unary("/inference.GRPCInferenceService/ServerLive",
                               request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=pb.ServerLiveResponse.FromString)
            try:
                return f(pb.ServerLiveRequest(), timeout=10).live, None
            except grpc.RpcError as e:
                return None, e.code()
        plain = grpc.insecure_channel(f"127.0.0.1:{gport}")
        ok, code = live(plain)
        check(ok is None, f"plaintext gRPC to the TLS server refused ({code})")
        plain.close()
        with open(cert, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        sec = grpc.secure_channel(f"127.0.0.1:{gport}", creds)
        ok, code = live(sec)
        check(ok is True, f"gRPC over TLS answers ServerLive ({code})")
        sec.close()
    finally:
        p.terminate()
        p.wait(timeout=30)
    log.seek(0)
    out = log.read()
    check(p.returncode == 0 and "Sanitizer" not in out, f"TLS server stops cleanly ({p.returncode})")


def infer_request(model, x, **kw):
    """A ModelInferRequest of x (float32) as input "input", raw contents."""
    req = pb.ModelInferRequest(model_name=model, **kw)
    t = req.inputs.add()
    t.name, t.datatype = "input", "FP32"
    t.shape.extend(x.shape)
    req.raw_input_contents.append(x.tobytes())
    return req


def shutdown_rounds():
    """SIGTERM with calls at every stage (queued in the runtime, being
    accepted, being read, an open stream): the server's shutdown tag does
    not wait for their completions, and one that surfaced after the queue
    was shut down started a batch on it (gRPC aborted the process). It is
    a race, so a few rounds."""
    req = infer_request("fmnist_mlp", np.random.rand(64, 1, 28, 28).astype(np.float32))
    req.outputs.add(name="logits")  # as tritonclient does: the output is checked first
    for rnd in range(4):
        p, log, _, gport = start([], f"sigterm{rnd}.log")
        chs = [grpc.insecure_channel(f"127.0.0.1:{gport}",
                                     options=[("grpc.use_local_subchannel_pool", 1)])
               for _ in range(2)]
        infer = [c.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                               request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=pb.ModelInferResponse.FromString)
                 for c in chs]
        stream = chs[0].stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                      request_serializer=lambda m: m.SerializeToString(),
                                      response_deserializer=pb.ModelInferResponse.FromString)
        idle = threading.Event()
        open_stream = stream(iter(idle.wait, True), timeout=60)  # sends nothing
        futs = [f.future(req, timeout=60) for _ in range(200) for f in infer]
        time.sleep(0.3)
        p.terminate()
        codes = {}
        for f in futs:
            try:
                f.result()
            except grpc.RpcError as e:
                codes[e.code()] = e.details()
        # a model let go during shutdown is a retryable UNAVAILABLE, not NOT_FOUND
        check(grpc.StatusCode.NOT_FOUND not in codes,
              f"round {rnd}: calls refused during shutdown are not NOT_FOUND {codes}")
        try:
            for _ in open_stream:
                pass
        except grpc.RpcError:
            pass
        idle.set()
        for c in chs:
            c.close()
        p.wait(timeout=30)
        log.seek(0)
        out = log.read()
        if p.returncode != 0 or "stopped" not in out or "Sanitizer" in out:
            print(out[-2000:])
        check(p.returncode == 0 and "stopped" in out and "Sanitizer" not in out,
              f"round {rnd}: SIGTERM with {len(futs)} calls in flight stops cleanly"
              f" (exit {p.returncode})")


def run(p, log):
    port = gport = None
    for _ in range(600):
        log.seek(0)
        m = re.search(r"listening on http://[0-9.]+:(\d+).*gRPC port (\d+)", log.read())
        if m:
            port, gport = int(m.group(1)), int(m.group(2))
            break
        if p.poll() is not None:
            break
        time.sleep(0.05)
    check(gport and gport > 0, f"gRPC port announced ({gport})")
    ch = grpc.insecure_channel(f"127.0.0.1:{gport}")

    def call(method, req, resp_cls, token=TOKEN):
        f = ch.unary_unary("/inference.GRPCInferenceService/" + method,
                           request_serializer=lambda x: x.SerializeToString(),
                           response_deserializer=resp_cls.FromString)
        md = [("authorization", "Bearer " + token)] if token else None
        return f(req, timeout=30, metadata=md)

    def error(method, req, resp_cls, token=TOKEN):
        try:
            call(method, req, resp_cls, token)
        except grpc.RpcError as e:
            return e.code(), e.details()
        return None, None

    check(call("ServerLive", pb.ServerLiveRequest(), pb.ServerLiveResponse).live, "ServerLive")
    check(call("ServerReady", pb.ServerReadyRequest(), pb.ServerReadyResponse).ready, "ServerReady")
    md = call("ServerMetadata", pb.ServerMetadataRequest(), pb.ServerMetadataResponse)
    check(md.name == "vario" and "classification" in md.extensions, f"ServerMetadata {md.extensions}")
    check(call("ModelReady", pb.ModelReadyRequest(name="fmnist_mlp"), pb.ModelReadyResponse).ready,
          "ModelReady")
    check(not call("ModelReady", pb.ModelReadyRequest(name="nope"), pb.ModelReadyResponse).ready,
          "ModelReady of an unknown model is false")
    mm = call("ModelMetadata", pb.ModelMetadataRequest(name="fmnist_mlp"), pb.ModelMetadataResponse)
    check(mm.inputs[0].name == "input" and list(mm.inputs[0].shape) == [-1, 1, 28, 28]
          and mm.outputs[0].datatype == "FP32", "ModelMetadata")
    code, msg = error("ModelMetadata", pb.ModelMetadataRequest(name="nope"), pb.ModelMetadataResponse)
    check(code == grpc.StatusCode.NOT_FOUND and msg == "model 'nope' is not loaded",
          f"unknown model -> {code} {msg}")
    code, msg = error("ModelConfig", pb.ModelConfigRequest(name="fmnist_mlp", version="7"),
                      pb.ModelConfigResponse)
    check(code == grpc.StatusCode.NOT_FOUND and "version '7'" in msg,
          f"unknown version -> {code} {msg}")

    x = np.load(os.path.join(DATA, "val_inputs.npy"))[:4].astype(np.float32)
    ref = np.load(os.path.join(DATA, "ref", "fmnist_mlp.npy"))[:4]
    req = infer_request("fmnist_mlp", x, id="g1")
    r = call("ModelInfer", req, pb.ModelInferResponse)
    y = np.frombuffer(r.raw_output_contents[0], dtype=np.float32).reshape(4, 10)
    check(r.id == "g1" and r.outputs[0].name == "logits" and list(r.outputs[0].shape) == [4, 10]
          and np.abs(y - ref).max() < 1e-3, "ModelInfer with raw_input_contents equals the reference")
    # same request over HTTP: same answer (one request path)
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                                   "data": x.ravel().tolist()}]}).encode()
    with urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{port}/v2/models/fmnist_mlp/infer", data=body), timeout=30) as h:
        yh = np.array(json.loads(h.read())["outputs"][0]["data"], dtype=np.float32).reshape(4, 10)
    check(np.abs(yh - y).max() < 1e-5, "HTTP and gRPC give the same logits")
    # The call's gRPC deadline is the request's: one the model cannot meet
    # is not served (the client has gone: gRPC cancels the call there), so
    # it takes no capacity. It was served to nobody.
    def outcomes(model):
        m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
        n = {}
        for line in m.splitlines():
            if line.startswith("vario_requests_total{") and f'model="{model}"' in line:
                o = re.search(r'outcome="(\w+)"', line).group(1)
                n[o] = n.get(o, 0) + float(line.split()[-1])
        return n
    big = infer_request("fmnist_cnn_s", np.random.rand(64, 1, 28, 28).astype(np.float32))
    call("ModelInfer", big, pb.ModelInferResponse)  # warm, and the profile learnt
    before = outcomes("fmnist_cnn_s")
    infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                           request_serializer=lambda m: m.SerializeToString(),
                           response_deserializer=pb.ModelInferResponse.FromString)
    codes = []
    for _ in range(5):
        try:
            infer(big, timeout=0.0002)
            codes.append("OK")
        except grpc.RpcError as e:
            codes.append(e.code().name)
    time.sleep(0.5)  # a call served after its deadline would be counted by now
    after = outcomes("fmnist_cnn_s")
    check(after.get("ok", 0) == before.get("ok", 0) and codes.count("OK") == 0,
          f"calls past their gRPC deadline are not served: {codes}, ok "
          f"{before.get('ok', 0)} -> {after.get('ok', 0)}")
    # an id or a name too long for the server is refused, as over HTTP, not
    # cut (a cut id could end mid-character: the echo is then a string
    # protobuf clients reject)
    for what, mk in [("id", lambda q: setattr(q, "id", "\u00e9" * 200)),
                     ("input name", lambda q: setattr(q.inputs[0], "name", "i" * 300)),
                     ("model name", lambda q: setattr(q, "model_name", "fmnist_mlp" + "x" * 300))]:
        bad = pb.ModelInferRequest()
        bad.CopyFrom(req)
        mk(bad)
        code, _ = error("ModelInfer", bad, pb.ModelInferResponse)
        check(code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND),
              f"a long {what} is refused: {code}")
    typed = pb.ModelInferRequest(model_name="fmnist_mlp")
    t = typed.inputs.add()
    t.name, t.datatype = "input", "FP32"
    t.shape.extend([1, 1, 28, 28])
    t.contents.fp32_contents.extend(x[0].ravel().tolist())
    o = typed.outputs.add()
    o.name = "logits"
    o.parameters["classification"].int64_param = 2
    r = call("ModelInfer", typed, pb.ModelInferResponse)
    raw = r.raw_output_contents[0]
    n = int.from_bytes(raw[:4], "little")
    first = raw[4:4 + n].decode()
    check(r.outputs[0].datatype == "BYTES" and list(r.outputs[0].shape) == [1, 2]
          and int(first.split(":")[1]) == int(ref[0].argmax()),
          f"typed contents + classification: top class {first}")
    for key, where in [("sequence_id", "request"), ("frobnicate", "request"),
                       ("shared_memory_region", "output")]:
        bad = pb.ModelInferRequest()
        bad.CopyFrom(req)
        if where == "request":
            bad.parameters[key].int64_param = 1
        else:
            bad.outputs.add(name="logits").parameters[key].string_param = "r"
        code, msg = error("ModelInfer", bad, pb.ModelInferResponse)
        check(code == grpc.StatusCode.INVALID_ARGUMENT and key in msg, f"{key}: {code} {msg}")
    # timeout: the largest that fits in ns is served (no deadline in
    # practice), a larger one is refused, as over HTTP
    long_t = pb.ModelInferRequest()
    long_t.CopyFrom(req)
    long_t.parameters["timeout"].int64_param = (2**63 - 1) // 1000
    check(len(call("ModelInfer", long_t, pb.ModelInferResponse).outputs) == 1,
          "timeout of ~292 years is served")
    long_t.parameters["timeout"].int64_param = (2**63 - 1) // 1000 + 1
    code, msg = error("ModelInfer", long_t, pb.ModelInferResponse)
    check(code == grpc.StatusCode.INVALID_ARGUMENT and "timeout" in msg, f"timeout too long: {msg}")
    # the spec: contents must not be given with raw_input_contents (the
    # typed values were silently ignored)
    both = pb.ModelInferRequest()
    both.CopyFrom(req)
    both.inputs[0].contents.fp32_contents.extend(x.ravel().tolist())
    code, msg = error("ModelInfer", both, pb.ModelInferResponse)
    check(code == grpc.StatusCode.INVALID_ARGUMENT and "raw_input_contents" in msg,
          f"contents and raw_input_contents together refused: {code} {msg}")
    short = pb.ModelInferRequest()
    short.CopyFrom(req)
    short.raw_input_contents[0] = x.tobytes()[:100]
    code, msg = error("ModelInfer", short, pb.ModelInferResponse)
    check(code == grpc.StatusCode.INVALID_ARGUMENT and "raw_input_contents" in msg, f"short raw data: {msg}")
    # KServe's string tensors: refused as such, not as an unknown datatype
    strs = pb.ModelInferRequest()
    strs.CopyFrom(req)
    strs.inputs[0].datatype = "BYTES"
    code, msg = error("ModelInfer", strs, pb.ModelInferResponse)
    check(code == grpc.StatusCode.INVALID_ARGUMENT and "BYTES (strings) is not supported" in msg,
          f"BYTES input refused by name: {code} {msg}")

    cfg = call("ModelConfig", pb.ModelConfigRequest(name="fmnist_mlp"), pb.ModelConfigResponse).config
    check(cfg.name == "fmnist_mlp" and cfg.max_batch_size == 64 and list(cfg.input[0].dims) == [1, 28, 28]
          and cfg.input[0].data_type == pb.TYPE_FP32, "ModelConfig")
    st = call("ModelStatistics", pb.ModelStatisticsRequest(name="fmnist_mlp"), pb.ModelStatisticsResponse)
    s = st.model_stats[0]
    check(s.name == "fmnist_mlp" and s.inference_stats.compute_infer.count >= 2
          and s.inference_stats.compute_input.count >= 2 and len(s.batch_stats) >= 1,
          "ModelStatistics: inference_stats split and batch_stats")
    idx = call("RepositoryIndex", pb.RepositoryIndexRequest(), pb.RepositoryIndexResponse)
    check(sorted(m.name for m in idx.models) == ["fmnist_cnn_s", "fmnist_mlp"]
          and all(m.state == "READY" for m in idx.models), "RepositoryIndex")
    for tok in [None, "wrong"]:  # repository calls change state: the admin token
        code, _ = error("RepositoryModelUnload",
                        pb.RepositoryModelUnloadRequest(model_name="fmnist_cnn_s"),
                        pb.RepositoryModelUnloadResponse, token=tok)
        check(code == grpc.StatusCode.UNAUTHENTICATED,
              f"RepositoryModelUnload with token {tok!r} -> {code}")
    call("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="fmnist_cnn_s"),
         pb.RepositoryModelUnloadResponse)
    check(not call("ModelReady", pb.ModelReadyRequest(name="fmnist_cnn_s"), pb.ModelReadyResponse).ready,
          "RepositoryModelUnload")
    check(call("ServerReady", pb.ServerReadyRequest(), pb.ServerReadyResponse).ready,
          "still ready: an unloaded model is not wanted")
    call("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="fmnist_cnn_s"),
         pb.RepositoryModelLoadResponse)
    check(call("ModelReady", pb.ModelReadyRequest(name="fmnist_cnn_s"), pb.ModelReadyResponse).ready,
          "RepositoryModelLoad")
    code, _ = error("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="absent"),
                    pb.RepositoryModelLoadResponse)
    check(code == grpc.StatusCode.NOT_FOUND, f"loading an absent model -> {code}")
    for bad in ["a b", "x" * 300]:  # the HTTP route's name rule
        code, _ = error("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name=bad),
                        pb.RepositoryModelLoadResponse)
        check(code == grpc.StatusCode.INVALID_ARGUMENT, f"loading {bad[:8]!r}... -> {code}")
    # Triton's model-control semantics: loading a loaded model reloads it
    # (still ready); parameters Vario does not honour are refused by name
    call("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="fmnist_cnn_s"),
         pb.RepositoryModelLoadResponse)
    check(call("ModelReady", pb.ModelReadyRequest(name="fmnist_cnn_s"), pb.ModelReadyResponse).ready,
          "RepositoryModelLoad of a loaded model reloads it")
    lr = pb.RepositoryModelLoadRequest(model_name="fmnist_cnn_s")
    lr.parameters["config"].string_param = "{}"
    code, msg = error("RepositoryModelLoad", lr, pb.RepositoryModelLoadResponse)
    check(code is not None and "config" in (msg or ""), f"load parameter config refused: {code} {msg}")
    code, msg = error("RepositoryModelLoad",
                      pb.RepositoryModelLoadRequest(model_name="fmnist_cnn_s", repository_name="r2"),
                      pb.RepositoryModelLoadResponse)
    check(code is not None and "repository_name" in (msg or ""), f"repository_name refused: {code} {msg}")
    ur = pb.RepositoryModelUnloadRequest(model_name="fmnist_cnn_s")
    ur.parameters["unload_dependents"].bool_param = True
    call("RepositoryModelUnload", ur, pb.RepositoryModelUnloadResponse)
    check(not call("ModelReady", pb.ModelReadyRequest(name="fmnist_cnn_s"), pb.ModelReadyResponse).ready,
          "RepositoryModelUnload with unload_dependents")
    # nothing to unload (unloaded already): OK, as Triton (was NOT_FOUND)
    code, msg = error("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="fmnist_cnn_s"),
                      pb.RepositoryModelUnloadResponse)
    check(code is None, f"RepositoryModelUnload of a model not loaded -> {code} {msg}")
    # a load runs off the queue thread, which also polls the sockets:
    # while a slow load (four instances, each profiled) ran on it, every
    # other call (ServerLive too) waited for it
    slow = os.path.join(REPO, "slow_resnet")
    shutil.copytree(os.path.join(SRC, "models/fmnist/fmnist_resnet"), slow)
    with open(os.path.join(slow, "config.json")) as f:
        sc = json.load(f)
    sc.update(name="slow_resnet", instances=4)
    with open(os.path.join(slow, "config.json"), "w") as f:
        json.dump(sc, f)
    load = ch.unary_unary("/inference.GRPCInferenceService/RepositoryModelLoad",
                          request_serializer=lambda m: m.SerializeToString(),
                          response_deserializer=pb.RepositoryModelLoadResponse.FromString)
    t0 = time.time()
    lf = load.future(pb.RepositoryModelLoadRequest(model_name="slow_resnet"), timeout=60,
                     metadata=[("authorization", "Bearer " + TOKEN)])
    time.sleep(0.1)
    t1 = time.time()
    call("ServerLive", pb.ServerLiveRequest(), pb.ServerLiveResponse)
    live_s = time.time() - t1
    lf.result()
    load_s = time.time() - t0
    check(live_s < load_s / 2, f"ServerLive answered during a load ({live_s:.3f} s, the load"
          f" {load_s:.3f} s)")
    check(call("ModelReady", pb.ModelReadyRequest(name="slow_resnet"), pb.ModelReadyResponse).ready,
          "the slow load succeeded")
    call("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="slow_resnet"),
         pb.RepositoryModelUnloadResponse)
    shutil.rmtree(slow)  # the shutdown rounds' servers need not load it
    code, _ = error("Nope", pb.ServerLiveRequest(), pb.ServerLiveResponse)
    check(code == grpc.StatusCode.UNIMPLEMENTED, f"unknown method -> {code}")
    # a Triton extension Vario lacks is named (the request bytes do not
    # matter: the method is refused before they are read)
    code, msg = error("SystemSharedMemoryStatus", pb.ServerLiveRequest(), pb.ServerLiveResponse)
    check(code == grpc.StatusCode.UNIMPLEMENTED and "shared-memory extension" in (msg or ""),
          f"SystemSharedMemoryStatus -> {code} {msg}")
    ch.close()


main()
