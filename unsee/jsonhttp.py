"""A JSON request handler base shared by ``unsee serve`` and the OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler

log = logging.getLogger("unsee.http")


class JSONHandler(BaseHTTPRequestHandler):
    server_version = "unsee"

    def log_message(self, fmt, *args):  # route to logging, not stderr
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
