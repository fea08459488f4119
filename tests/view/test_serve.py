"""`unsee view --serve`: the page, and nothing else, on 127.0.0.1."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import pytest

from unsee.plugins.view import page_server


def test_the_server_gives_the_page_and_nothing_else(tmp_path):
    page = tmp_path / "unsee-view-s.html"
    page.write_text("<html><body>the page</body></html>")
    (tmp_path / "secret.txt").write_text("not served")
    server = page_server(page)
    host, port = server.server_address[:2]
    assert host == "127.0.0.1" and port > 0
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        for path in ("/", "/unsee-view-s.html", "/?x=1"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                assert r.status == 200 and b"the page" in r.read()
                assert r.headers["Content-Type"].startswith("text/html")
        for path in ("/secret.txt", "/../secret.txt", "/x/"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
            assert e.value.code == 404
    finally:
        server.shutdown()
        server.server_close()
