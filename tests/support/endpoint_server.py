"""unsee's OpenAI-compatible server in a thread, for the eval tests."""

import threading

from unsee.openai_server import make_server


def serve(model):
    """``make_server`` on a free port in a daemon thread: (server, base URL)."""
    server = make_server(model, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
