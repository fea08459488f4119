"""``unsee view --serve``: one page on 127.0.0.1 (the page needs nothing else: no assets to serve)."""

from __future__ import annotations

from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _OnePage(SimpleHTTPRequestHandler):
    """Serves the page at ``/`` and at its own name; everything else is 404 (no directory listing)."""

    page: Path

    def do_GET(self):  # noqa: N802 (http.server's naming)
        if self.path.split("?", 1)[0] not in ("/", "/" + self.page.name):
            self.send_error(404)
            return
        body = self.page.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):  # noqa: N802
        self.send_error(405)

    def log_message(self, format, *args):  # quiet: the CLI prints the URL once
        pass


def page_server(page: str | Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server (not started: call ``serve_forever``) of ``page``; port 0 picks a free one."""
    handler = type("OnePage", (_OnePage,), {"page": Path(page).resolve()})
    return ThreadingHTTPServer((host, port), partial(handler, directory=str(Path(page).resolve().parent)))
