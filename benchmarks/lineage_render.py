"""How long the web UI's global lineage page takes to render a profile's graph.

Starts ``dagster-webserver`` on an empty instance for ``--profile``, waits until the code
location has loaded (the load time is reported too), opens ``/asset-groups`` in headless
Chromium and times, from the page's navigation, until the graph is drawn: its layout
computed and its first nodes (SVG ``foreignObject`` elements) on screen. It gives up after
``--timeout`` seconds and says so. Then the same for one group's own lineage page
(``--group``), which draws every asset of the group as a node: how many of its nodes the
first screen shows, of how many.

    .venv/bin/python -m benchmarks.lineage_render --profile paper

Needs Playwright and a Chromium binary (Debian's ``chromium``), as ``tests/project/test_web_ui.py``.
One measurement per call; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REPO = "__repository__@saturated_dag"  # the UI's address of the code location
QUERY = ("{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
         "locationOrLoadError { __typename } } } } }")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loaded(url: str) -> bool:
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": QUERY}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            entries = json.load(response)["data"]["workspaceOrError"]["locationEntries"]
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)


def _until(predicate, timeout: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.5)
    return None


def measure(profile: str, timeout: float, group: str | None = None) -> dict[str, object]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    tmp = Path(tempfile.mkdtemp(prefix="lineage_"))
    home = tmp / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "SATURATED_DAG_PROFILE": profile,
           "SATURATED_DAG_OUTPUT_DIR": str(tmp / "outputs")}
    port = _port()
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    server = subprocess.Popen([str(BIN / "dagster-webserver"), "-p", str(port), "-w",
                               "workspace.yaml"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    out: dict[str, object] = {"profile": profile}
    try:
        load = _until(lambda: _loaded(url), 600)
        out["location loaded (s)"] = None if load is None else round(time.monotonic() - started,
                                                                      1)
        if load is None:
            return out
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium,
                                        args=["--no-sandbox", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1920, "height": 1080})
            skip = page.get_by_role("button", name="Skip")  # the first-visit dialog
            page.add_locator_handler(skip, lambda button: button.click())
            begin = time.monotonic()
            page.goto(f"{url}/asset-groups", wait_until="load")
            # the graph is drawn once its layout is computed: its nodes are foreignObjects
            drawn = _until(lambda: page.evaluate(
                "document.querySelectorAll('svg foreignObject').length") > 0, timeout)
            if drawn is None:
                out["gave up"] = f"no graph drawn after {timeout:.0f} s"
            else:
                out["graph drawn (s)"] = round(time.monotonic() - begin, 1)
                out["nodes in view"] = page.evaluate(
                    "document.querySelectorAll('svg foreignObject').length")
            page.screenshot(path=str(tmp / "lineage.png"))
            out["screenshot"] = str(tmp / "lineage.png")
            if group:  # one group's own lineage page: every asset of it as a node
                begin = time.monotonic()
                page.goto(f"{url}/locations/{REPO}/asset-groups/{group}", wait_until="load")
                drawn = _until(lambda: page.evaluate(
                    "document.querySelectorAll('svg foreignObject').length") > 0, timeout)
                key = f"group {group} drawn (s)"
                out[key] = None if drawn is None else round(time.monotonic() - begin, 1)
                if drawn is not None:  # how much of the group one screen shows
                    page.wait_for_timeout(2000)  # the fit-to-screen zoom settles
                    out["group nodes in view"] = page.evaluate(
                        "[...document.querySelectorAll('svg foreignObject')].filter(n => {"
                        " const r = n.getBoundingClientRect();"
                        " return r.bottom > 0 && r.right > 0 && r.top < innerHeight"
                        " && r.left < innerWidth; }).length")
                    # the whole graph's drawn size at the zoom the page opened with, in
                    # screens of the viewport (the UI draws only the nodes in view)
                    size = page.evaluate(
                        "(() => { const s = [...document.querySelectorAll('svg')].sort("
                        "(a, b) => b.getBoundingClientRect().height"
                        " * b.getBoundingClientRect().width - a.getBoundingClientRect().height"
                        " * a.getBoundingClientRect().width)[0].getBoundingClientRect();"
                        " return [s.width, s.height, innerWidth, innerHeight]; })()")
                    out["group graph (px)"] = [round(size[0]), round(size[1])]
                    out["group screens"] = round(size[0] * size[1] / (size[2] * size[3]), 1)
                page.locator("body").hover()  # an action: the first-visit dialog's handler runs
                page.screenshot(path=str(tmp / "group.png"))
                out["group screenshot"] = str(tmp / "group.png")
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--group", default="chain_sum_saturated",
                        help="also time this group's own lineage page ('' to skip)")
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    print(json.dumps(measure(args.profile, args.timeout, args.group or None), indent=1))


if __name__ == "__main__":
    main()
