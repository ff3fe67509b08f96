"""Open a page in headless Chromium over the DevTools protocol and report what went wrong."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1200,900",
)


#: What the page shows once rendered: title, images, headings, tables under their heading.
PAGE_JS = """
(() => {
  const images = Array.from(document.images).map(
    i => ({alt: i.alt, complete: i.complete, naturalWidth: i.naturalWidth}));
  const headings = [];
  const tables = [];
  let heading = "";
  for (const el of document.querySelectorAll("h2, h3, table")) {
    if (el.tagName === "TABLE") {
      const rows = Array.from(el.rows).map(
        r => Array.from(r.cells).map(c => c.innerText.trim()));
      tables.push({heading: heading, rows: rows});
    } else {
      heading = el.innerText.trim();
      headings.push(heading);
    }
  }
  return JSON.stringify({title: document.title, images, headings, tables});
})()
"""


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageReport:
    images: list[dict] = field(default_factory=list)
    """One entry per <img>: alt, complete, naturalWidth."""
    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions and failed loads."""
    title: str = ""
    headings: list[str] = field(default_factory=list)
    """The rendered text of every <h2> and <h3>, in page order."""
    tables: list[dict] = field(default_factory=list)
    """Every <table> as rendered: ``heading`` (the last <h2>/<h3> before it) and ``rows``
    (each row's cell texts, header row included)."""


def _wait_port(user_dir: Path, proc: subprocess.Popen, timeout: float) -> int:
    port_file = user_dir / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with code {proc.returncode}")
        if port_file.is_file():
            text = port_file.read_text().split()
            if text:
                return int(text[0])
        time.sleep(0.1)
    raise TimeoutError("chromium did not open its DevTools port")


def inspect_page(url: str, screenshot: Path | None = None, timeout: float = 60.0) -> PageReport:
    """Load ``url`` in headless Chromium; collect images, console errors, a screenshot."""
    from websockets.sync.client import connect

    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed")
    report = PageReport()
    # Chromium's helper processes may still be writing the profile when the browser has
    # exited: cleanup of the profile folder must not fail the check.
    with tempfile.TemporaryDirectory(prefix="fpchrome", ignore_cleanup_errors=True) as tmp:
        user_dir = Path(tmp)
        proc = subprocess.Popen(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={user_dir}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            port = _wait_port(user_dir, proc, timeout)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.load(r)
            page = next(t for t in targets if t.get("type") == "page")
            with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10) as ws:
                counter = iter(range(1, 1_000_000))

                def handle(msg: dict) -> None:
                    method = msg.get("method")
                    params = msg.get("params", {})
                    if method == "Runtime.consoleAPICalled" and params.get("type") in (
                        "error",
                        "assert",
                    ):
                        args = [str(a.get("value", a.get("description"))) for a in params["args"]]
                        report.errors.append("console: " + " ".join(args))
                    elif method == "Runtime.exceptionThrown":
                        report.errors.append("exception: " + json.dumps(params)[:300])
                    elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                        report.errors.append("log: " + params["entry"].get("text", ""))
                    elif method == "Network.loadingFailed":
                        report.errors.append("load failed: " + params.get("errorText", ""))

                def call(method: str, **params) -> dict:
                    msg_id = next(counter)
                    ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
                    end = time.monotonic() + timeout
                    while time.monotonic() < end:
                        msg = json.loads(ws.recv(timeout=end - time.monotonic()))
                        if msg.get("id") == msg_id:
                            if "error" in msg:
                                raise RuntimeError(f"{method}: {msg['error']}")
                            return msg.get("result", {})
                        handle(msg)
                    raise TimeoutError(method)

                for domain in ("Runtime", "Log", "Page", "Network"):
                    call(f"{domain}.enable")
                call("Page.navigate", url=url)
                # Poll the document itself: a load event could still be about:blank's.
                end = time.monotonic() + timeout
                probe = "location.href + ' ' + document.readyState"
                while True:
                    state = call("Runtime.evaluate", expression=probe, returnByValue=True)
                    if state["result"].get("value") == f"{url} complete":
                        break
                    if time.monotonic() > end:
                        raise TimeoutError(f"page did not finish loading: {state}")
                    time.sleep(0.1)
                value = call("Runtime.evaluate", expression=PAGE_JS, returnByValue=True)
                data = json.loads(value["result"]["value"])
                report.title = data["title"]
                report.images = data["images"]
                report.headings = data["headings"]
                report.tables = data["tables"]
                if screenshot is not None:
                    shot = call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                    screenshot.parent.mkdir(parents=True, exist_ok=True)
                    screenshot.write_bytes(base64.b64decode(shot["data"]))
                # drain late events (e.g. errors fired right after load)
                end = time.monotonic() + 0.5
                while True:
                    try:
                        handle(json.loads(ws.recv(timeout=max(0.01, end - time.monotonic()))))
                    except TimeoutError:
                        break
        finally:
            # The whole process group: the browser and its renderer/GPU/zygote helpers.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return report
