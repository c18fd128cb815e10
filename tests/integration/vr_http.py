"""HTTP helpers shared by the Python process tests (control_scenario.py,
tests/security/hostile_client.py): one request with an optional bearer
token, and a multipart/form-data body for uploads."""
import json
import os
import urllib.error
import urllib.request


def request(port, method, path, body=None, raw=None, ctype=None, token=None):
    """(status, parsed JSON or raw bytes)."""
    data = json.dumps(body).encode() if body is not None else raw
    h = {"Content-Type": ctype} if ctype else {}
    if token:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            b = r.read()
            return r.status, (json.loads(b) if "json" in (r.headers["Content-Type"] or "")
                              else b)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def multipart(fields, files):
    """(body, Content-Type): text fields {name: value}, files {name: bytes}."""
    b = "vario-" + os.urandom(8).hex()
    out = b""
    for k, v in fields.items():
        out += f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    for k, data in files.items():
        out += (f'--{b}\r\nContent-Disposition: form-data; name="{k}"; filename="f"\r\n'
                f'Content-Type: application/octet-stream\r\n\r\n').encode() + data + b"\r\n"
    return out + f"--{b}--\r\n".encode(), "multipart/form-data; boundary=" + b


def start_server(args, log_path):
    """Starts `VARIO serve ... --port 0` (args: the whole command line),
    logging to log_path; returns (process, port) once it listens (20 s at
    most: a sanitised build on a loaded machine; else exits showing the log)."""
    import re
    import subprocess
    import sys
    import time
    log = open(log_path, "w+")
    p = subprocess.Popen(args, stderr=log, stdout=log)
    for _ in range(400):
        log.seek(0)
        text = log.read()
        m = re.search(r"listening on https?://[0-9.]+:(\d+)", text)
        if m:
            return p, int(m.group(1))
        time.sleep(0.05)
    p.kill()
    sys.stderr.write(text[-4000:])
    sys.exit("server did not start")
