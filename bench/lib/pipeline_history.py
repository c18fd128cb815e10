"""Follows the pipeline policy's history in GET /v2/pipelines/fashion_scenes
for the live pipeline benchmarks (bench/loki_live.sh, bench/inferline_live.sh):
prints each new entry once, as a CSV line, and writes it to a file too."""
import json
import os
import sys
import time
import urllib.request


def follow(port, csv, done, hdr, line_of, idle_polls, limit_s=None):
    """Polls once a second; line_of(entry) makes an entry's CSV line. Stops
    idle_polls + 1 polls after the file `done` appears (the load finished),
    so the ticks that close the last phase are still caught. Exits with
    status 1 when `done` has not appeared after limit_s seconds (wall
    clock; None: no limit)."""
    start = time.monotonic()
    seen = -1.0
    print(hdr)
    with open(csv, "w") as f:
        f.write(hdr + "\n")
        idle = 0
        while True:
            j = json.load(urllib.request.urlopen(
                f"http://127.0.0.1:{port}/v2/pipelines/fashion_scenes"))
            for h in j["policy"]["history"]:
                if h["t_s"] <= seen:
                    continue
                seen = h["t_s"]
                line = line_of(h)
                print(line, flush=True)
                f.write(line + "\n")
            if os.path.exists(done):
                idle += 1
                if idle > idle_polls:
                    break
            elif limit_s is not None and time.monotonic() - start > limit_s:
                sys.exit(f"pipeline_history: the load did not finish within "
                         f"{limit_s:.0f} s ({done} absent)")
            time.sleep(1)
