"""The Docker daemon, as the sandbox sees it: a client, an availability check,
and the translation of SDK/transport errors into ``unsee.sandbox`` errors.

Shared by the docker backend (:mod:`.docker_env`) and the image builder
(:mod:`.image`); it imports neither, so imports point one way::

    docker_env ──> image ──> docker_api ──> errors
        └──────────────────────┘

The docker SDK itself is imported lazily, inside the functions, so importing
``unsee.sandbox`` never needs it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

from .errors import BackendError, DaemonLost, SandboxError, SandboxUnavailable

__all__ = [
    "docker_client",
    "daemon_unavailable_reason",
    "translate_errors",
    "is_not_found",
    "INSTALL_HINT",
    "CLIENT_TIMEOUT",
]

INSTALL_HINT = (
    "Start a Docker daemon (as root: `apt-get install -y docker.io` then "
    "`dockerd --bridge=none --iptables=false --ip6tables=false --live-restore &`, "
    "or `source scripts/docker-up.sh`), set DOCKER_HOST if it uses another socket, "
    "or use the 'local' backend"
)
#: seconds a client waits for the daemon's answer to one call
CLIENT_TIMEOUT = 600

_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def docker_client(*, fresh: bool = False, timeout: int = CLIENT_TIMEOUT):
    """A (cached, per DOCKER_HOST) docker SDK client for a daemon that answers ping.

    Raises SandboxUnavailable with an install/start hint when there is none.
    """
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxUnavailable("the docker SDK is not installed", backend="docker",
                                 hint="pip install docker") from exc
    key = os.environ.get("DOCKER_HOST", "")
    with _clients_lock:
        client = None if fresh else _clients.get(key)
        if client is not None:
            return client
        try:
            client = docker.from_env(timeout=timeout)
            client.ping()
        except Exception as exc:
            raise SandboxUnavailable(
                f"no Docker daemon reachable at {key or 'the default socket'} ({type(exc).__name__})",
                backend="docker",
                hint=INSTALL_HINT,
            ) from exc
        _clients[key] = client
        return client


def daemon_unavailable_reason() -> str | None:
    """None when a daemon answers ping, else why not (the registry's check for docker)."""
    try:
        import docker

        # a daemon that is there but busy (a loaded 2-core CI machine) can take seconds to answer its
        # first call; a missing one fails at once, so the longer limit costs nothing when there is none
        client = docker.from_env(timeout=15)
        try:
            client.ping()
        finally:
            client.close()
        return None
    except Exception as exc:
        return f"no Docker daemon reachable ({type(exc).__name__}: {str(exc)[:120]})"


@contextlib.contextmanager
def translate_errors(what: str = "docker call") -> Iterator[None]:
    """Map SDK/transport exceptions to unsee.sandbox errors."""
    import docker.errors
    import requests.exceptions

    try:
        yield
    except SandboxError:
        raise
    except requests.exceptions.ReadTimeout as exc:
        raise DaemonLost(f"{what}: the Docker daemon did not answer in time") from exc
    except (requests.exceptions.ConnectionError, ConnectionError) as exc:
        raise DaemonLost(f"{what}: lost the Docker daemon ({type(exc).__name__})") from exc
    except docker.errors.APIError as exc:
        raise BackendError(f"{what}: {exc.explanation or exc}") from exc
    except docker.errors.DockerException as exc:
        raise DaemonLost(f"{what}: {exc}") from exc
    except OSError as exc:  # raw socket errors from hijacked exec streams
        raise DaemonLost(f"{what}: {exc}") from exc


def is_not_found(exc: BaseException) -> bool:
    """Whether ``exc`` is the SDK's NotFound (a missing path, container or image)."""
    import docker.errors

    return isinstance(exc, docker.errors.NotFound)
