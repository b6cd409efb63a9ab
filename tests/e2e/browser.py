"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol on a pipe — no network, no extra
packages.

    with Browser() as b:
        b.open(Path("report.html"), width=1200)
        b.evaluate("document.images.length")
        b.screenshot(Path("shot.png"))

--remote-debugging-pipe: Chromium reads commands from fd 3 and writes replies to fd 4, one JSON
message per NUL byte. The flags keep it off the network (no background networking, component
update, sync, QUIC) and give it a throw-away profile.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
)


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self.next_id = 0
        self.buffer = b""
        self.session: str | None = None

    def __enter__(self) -> "Browser":
        binary = chromium_binary()
        if binary is None:
            raise BrowserError("chromium is not installed: apt-get install chromium (.ci/run does)")
        self.profile_dir = tempfile.mkdtemp(prefix="cardtime-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # Chromium expects the pipe ends at exactly fd 3 (its input) and fd 4 (its output).
        # Copies above 4 first, so that placing one end cannot overwrite the other. Python's own fds are
        # close-on-exec (PEP 446), so close_fds=False leaks nothing but the two dup2 copies, as intended;
        # (close_fds=True would close fds 3 and 4 after preexec_fn placed them.)
        high_r, high_w = os.dup(to_browser_r), os.dup(from_browser_w)

        def place_fds() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile_dir}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=place_fds,
            close_fds=False,
        )
        for fd in (to_browser_r, from_browser_w, high_r, high_w):
            os.close(fd)
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.session = None
            self.call("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.to_browser, self.from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile_dir, ignore_errors=True)

    # -- protocol

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.next_id

    def receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"chromium closed the pipe (exit {self.proc.poll()})")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        wanted = self.send(method, params)
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = self.receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = self.receive(deadline)
            if message.get("method") == method:
                return message.get("params", {})

    # -- what a test does

    def open(self, path: Path, width: int = 1200, height: int = 900) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.call("Page.navigate", url=Path(path).resolve().as_uri())
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"evaluating {expression[:80]!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
            )
        data = self.call("Page.captureScreenshot", **params)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)
