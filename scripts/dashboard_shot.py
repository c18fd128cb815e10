#!/usr/bin/python3
"""Opens Vario's live dashboard in headless Chromium, lets it poll for a
while, then prints what its charts received (the page's status element:
polls, points, max requests/s) as JSON and optionally writes a screenshot.
Drives Chromium over the DevTools protocol on a pipe (--remote-debugging-
pipe), so it needs nothing but Chromium and Python.

usage: dashboard_shot.py URL SECONDS [SCREENSHOT.png]
exit: 0 ok, 1 error, 77 no chromium
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--remote-debugging-pipe"]


class Browser:
    def __init__(self, chrome, profile):
        self.cmd_r, self.cmd_w = os.pipe()
        self.res_r, self.res_w = os.pipe()

        def fds():  # the child reads commands on fd 3, writes answers on fd 4
            a = fcntl.fcntl(self.cmd_r, fcntl.F_DUPFD, 10)  # out of 3/4's way
            b = fcntl.fcntl(self.res_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)  # dup2 to another number clears close-on-exec
            os.dup2(b, 4)
        self.p = subprocess.Popen([chrome] + FLAGS + [f"--user-data-dir={profile}", "about:blank"],
                                  preexec_fn=fds, close_fds=False,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(self.cmd_r)
        os.close(self.res_w)
        self.buf, self.next_id = b"", 0

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        end = time.time() + timeout
        while time.time() < end:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                m = json.loads(raw)
                if m.get("id") == self.next_id:
                    if "error" in m:
                        raise RuntimeError(f"{method}: {m['error']}")
                    return m.get("result", {})
            chunk = os.read(self.res_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
        raise RuntimeError(f"{method}: no answer in {timeout} s")

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()


def main():
    url, secs = sys.argv[1], float(sys.argv[2])
    shot = sys.argv[3] if len(sys.argv) > 3 else None
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chrome:
        print("skip: no chromium")
        return 77
    profile = tempfile.mkdtemp(prefix="vr_chromium_")
    b = Browser(chrome, profile)
    try:
        tid = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = b.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": 1400, "height": 1100, "deviceScaleFactor": 1, "mobile": False}, sid)
        b.call("Page.enable", session=sid)
        b.call("Page.navigate", {"url": url}, sid)
        time.sleep(secs)  # the page polls once a second meanwhile
        r = b.call("Runtime.evaluate", {
            "expression": "JSON.stringify(Object.assign({}, document.getElementById('status')"
                          ".dataset, {variants: document.getElementById('variants').textContent,"
                          " actions: document.getElementById('actions').rows.length,"
                          " pipes: document.getElementById('pipes').textContent,"
                          " charts: typeof Chart}))",
            "returnByValue": True}, sid)
        print(r["result"]["value"])
        if shot:
            png = b.call("Page.captureScreenshot", {"format": "png"}, sid)["data"]
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png))
        return 0
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)


sys.exit(main())
