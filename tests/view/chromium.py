"""A small headless-Chromium harness for the ``unsee view`` page tests.

``dump_dom`` returns the DOM after the page's scripts ran; ``screenshot``
writes a PNG. Each run gets a fresh profile directory and no network
features (the page needs none; its CSP forbids any). The browser is the
Debian package ``chromium`` (``/usr/bin/chromium``); when it is absent,
:func:`find_chromium` raises :class:`ChromiumMissing`, so the tests fail
(they are never skipped).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

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
