"""A small headless-Chromium harness for the page tests (``unsee view``, a trace UI).

``dump_dom`` returns the DOM after the page's scripts ran; ``screenshot``
writes a PNG. Each run gets a fresh profile directory and no network
features (the page needs none; its CSP forbids any). The browser is the
Debian package ``chromium`` (``/usr/bin/chromium``); when it is absent,
:func:`find_chromium` raises :class:`ChromiumMissing`, so the tests fail
(they are never skipped).

:class:`DevTools` drives one browser as a person would (open a URL, click a
text, type into the focused field, press Enter, wait for text to appear) over
the Chrome DevTools Protocol on a pipe (``--remote-debugging-pipe``: no port,
no websocket client, nothing to install beyond Chromium).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_PATH = "/usr/bin/chromium"
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
    "--disable-extensions",
    "--hide-scrollbars",
)


class ChromiumMissing(RuntimeError):
    """No Chromium binary: install the Debian package ``chromium``."""


def find_chromium() -> str:
    """The Chromium binary: ``$UNSEE_CHROMIUM``, else ``/usr/bin/chromium``, else ``chromium`` on PATH."""
    for candidate in (os.environ.get("UNSEE_CHROMIUM"), DEFAULT_PATH, shutil.which("chromium")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise ChromiumMissing(
        f"Chromium not found at {DEFAULT_PATH} (nor on PATH, nor $UNSEE_CHROMIUM): the unsee view "
        "browser tests need the Debian package 'chromium': "
        "apt-get install -y chromium"
    )


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="unsee-chromium-") as profile:
        cmd = [find_chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"chromium did not finish within {timeout}s: {' '.join(cmd)}") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def file_url(html_path: str | os.PathLike[str], fragment: str = "") -> str:
    """The ``file://`` URL of ``html_path``, with ``#fragment`` when given."""
    url = Path(html_path).resolve().as_uri()
    return f"{url}#{fragment}" if fragment else url


def dump_dom(
    html_path: str | os.PathLike[str], budget_ms: int = 5000, timeout: float = 180, fragment: str = ""
) -> str:
    """The serialised DOM of ``html_path`` once its scripts ran (``--dump-dom``).

    ``budget_ms`` is Chromium's ``--virtual-time-budget``; ``fragment`` is the
    URL hash (the page reads ``mode=`` and ``node=`` from it); ``timeout`` (s)
    bounds the whole browser run.
    """
    proc = _run([f"--virtual-time-budget={budget_ms}", "--dump-dom", file_url(html_path, fragment)], timeout)
    return proc.stdout


def screenshot(
    html_path: str | os.PathLike[str],
    png_path: str | os.PathLike[str],
    size: tuple[int, int] = (1400, 900),
    budget_ms: int = 5000,
    timeout: float = 180,
    fragment: str = "",
) -> Path:
    """Render ``html_path`` at ``size`` (width, height) into the PNG ``png_path``; returns its path."""
    png = Path(png_path).resolve()
    _run(
        [
            f"--virtual-time-budget={budget_ms}",
            f"--screenshot={png}",
            f"--window-size={size[0]},{size[1]}",
            file_url(html_path, fragment),
        ],
        timeout,
    )
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot at {png}")
    return png


class DevToolsError(RuntimeError):
    """The browser answered a DevTools call with an error, died, or a wait ran out of time."""


class DevTools:
    """One headless Chromium driven over the DevTools protocol on a pipe; a context manager.

    The browser reads JSON messages from its fd 3 and writes them to fd 4, each
    ended by a NUL byte. Every call has a deadline (``timeout`` s), so a hung
    browser fails the test instead of stalling it. One page (tab), at ``size``
    CSS pixels, device scale 1: screenshots are exactly ``size``.
    """

    def __init__(self, size: tuple[int, int] = (1280, 800), timeout: float = 60.0) -> None:
        self.size, self.timeout = size, timeout
        self._profile = tempfile.TemporaryDirectory(prefix="unsee-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def pipes_at_3_and_4() -> None:  # in the child, before exec: the protocol's fixed fds
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)  # (out of the way of 3 and 4 first)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)  # dup2 makes them inheritable
            os.dup2(b, 4)

        cmd = [find_chromium(), *FLAGS, f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe",
               f"--window-size={size[0]},{size[1]}", "about:blank"]
        # close_fds=False: Python's own fds are not inheritable (PEP 446), so only 0-4 reach the browser
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, preexec_fn=pipes_at_3_and_4, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._next_id = 0
        self._closed = False
        self.session: str | None = None
        try:
            target = self.call("Target.createTarget", url="about:blank", session=False)["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True,
                                     session=False)["sessionId"]
            self.call("Page.enable")
            self.call("Runtime.enable")
            self.call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1], deviceScaleFactor=1,
                      mobile=False)
        except BaseException:
            self.close()
            raise

    # -- the protocol ------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevToolsError(f"chromium sent no DevTools message within {self.timeout}s")
            # (poll, not select: in a long test run this process holds more than 1 024 descriptors,
            # and select() refuses a descriptor numbered past FD_SETSIZE)
            poller = select.poll()
            poller.register(self._from_browser, select.POLLIN)
            ready = poller.poll(int(min(left, 1.0) * 1000))
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise DevToolsError(f"chromium closed its DevTools pipe (exit {self._proc.poll()})")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, *, session: bool = True, timeout: float | None = None, **params: Any) -> dict:
        """Send one DevTools command (to the page's session unless ``session=False``); its result.
        Events that arrive meanwhile are dropped: the waits poll the page instead."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._to_browser, data):]
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise DevToolsError(f"{method}: {reply['error'].get('message')} {reply['error'].get('data', '')}")
                return reply.get("result", {})

    # -- what a person does ------------------------------------------------------------------
    def open(self, url: str) -> None:
        """Navigate to ``url`` (returns once the navigation is committed; wait for content with :meth:`wait_for`)."""
        res = self.call("Page.navigate", url=url)
        if res.get("errorText"):
            raise DevToolsError(f"could not open {url}: {res['errorText']}")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise DevToolsError(f"{expression[:80]!r} threw: {res['exceptionDetails'].get('text')} "
                                f"{res['exceptionDetails'].get('exception', {}).get('description', '')}")
        return res.get("result", {}).get("value")

    def wait_for(self, expression: str, what: str, timeout: float = 60.0, every: float = 0.25) -> Any:
        """Poll a JavaScript expression until it is truthy; its value. ``DevToolsError`` naming
        ``what`` when ``timeout`` s pass first."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise DevToolsError(f"waited {timeout}s for {what}")
            time.sleep(every)

    def text(self) -> str:
        """The page's visible text (``document.body.innerText``)."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for_text(self, *texts: str, timeout: float = 60.0) -> str:
        """Wait until every one of ``texts`` is in the page's visible text; that text."""
        js = json.dumps(list(texts))
        self.wait_for(f"(() => {{ const t = document.body ? document.body.innerText : ''; "
                      f"return {js}.every(s => t.includes(s)); }})()", f"the page to show {list(texts)}", timeout)
        return self.text()

    def click_at(self, x: float, y: float) -> None:
        """A left click at page coordinates (CSS pixels), as the mouse makes it."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=0 if kind == "mouseMoved" else 1)

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 10) -> None:
        """Press the left button at ``start``, move to ``end`` in ``steps``, release (a resize handle)."""
        (x0, y0), (x1, y1) = start, end
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x0, y=y0)
        self.call("Input.dispatchMouseEvent", type="mousePressed", x=x0, y=y0, button="left", clickCount=1)
        for i in range(1, steps + 1):
            self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x0 + (x1 - x0) * i / steps,
                      y=y0 + (y1 - y0) * i / steps, button="left", buttons=1)
        self.call("Input.dispatchMouseEvent", type="mouseReleased", x=x1, y=y1, button="left", clickCount=1)

    def where(self, selector: str, text: str | None = None, timeout: float = 60.0) -> tuple[float, float]:
        """The centre (page coordinates) of the first visible element matching ``selector`` (whose
        trimmed text is ``text``, when given), once it is there, scrolled into view."""
        js = f"""(() => {{
          const want = {json.dumps(text)};
          for (const el of document.querySelectorAll({json.dumps(selector)})) {{
            if (want !== null && el.innerText.trim() !== want) continue;
            el.scrollIntoView({{block: 'nearest', inline: 'nearest'}});
            const r = el.getBoundingClientRect();
            if (r.width > 0 && r.height > 0) return [r.left + r.width / 2, r.top + r.height / 2];
          }}
          return null;
        }})()"""
        x, y = self.wait_for(js, f"{selector!r}" + (f" showing {text!r}" if text is not None else ""), timeout)
        return x, y

    def click(self, selector: str, text: str | None = None, timeout: float = 60.0) -> None:
        """Click the first visible element matching the CSS ``selector`` (whose text is ``text``,
        trimmed, when given), once it is there: scrolled into view, clicked at its centre."""
        self.click_at(*self.where(selector, text, timeout))

    def focus(self, selector: str, timeout: float = 60.0) -> None:
        """Click the field matching ``selector`` until it has the keyboard focus (a page that is
        still re-rendering can swallow a click, or replace the element under it)."""
        has_focus = (f"!!(document.activeElement && document.activeElement.closest("
                     f"{json.dumps(selector)}))")
        deadline = time.monotonic() + timeout
        while True:
            self.click(selector, timeout=max(1.0, deadline - time.monotonic()))
            try:
                self.wait_for(has_focus, f"{selector!r} to have the focus", timeout=2)
                return
            except DevToolsError:
                if time.monotonic() > deadline:
                    raise

    def type(self, text: str) -> None:
        """Type ``text`` into the focused field (as an input method commits it)."""
        self.call("Input.insertText", text=text)

    def select_all(self) -> None:
        """Select everything in the focused field (the editor's own select-all command)."""
        self.call("Input.dispatchKeyEvent", type="keyDown", key="a", code="KeyA", windowsVirtualKeyCode=65,
                  modifiers=2, commands=["selectAll"])
        self.call("Input.dispatchKeyEvent", type="keyUp", key="a", code="KeyA", windowsVirtualKeyCode=65, modifiers=2)

    def press(self, key: str = "Enter") -> None:
        """Press and release a named key (``Enter``, ``Escape``, ``Tab``)."""
        codes = {"Enter": 13, "Escape": 27, "Tab": 9}
        extra = {"text": "\r"} if key == "Enter" else {}
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=key, windowsVirtualKeyCode=codes[key],
                  **extra)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=key, windowsVirtualKeyCode=codes[key])

    def dom(self) -> str:
        """The serialised DOM as it is now."""
        return self.evaluate("document.documentElement.outerHTML") or ""

    def screenshot(self, png_path: str | os.PathLike[str]) -> Path:
        """The page as shown now, ``size`` pixels, into the PNG ``png_path``; returns its path."""
        png = Path(png_path)
        png.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return png

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the browser (politely, then by force) and remove its profile; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            try:
                self.session = None
                self.call("Browser.close", session=False, timeout=5)
            except (DevToolsError, OSError):
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> "DevTools":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
