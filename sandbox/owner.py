"""Whose sandbox objects these are, on a daemon that many homes share.

A Docker daemon is shared by every unsee home on the machine (other users',
other test runs'), so the docker backend labels what it makes with an *owner
id* its caller gives it (``DockerEnvironment(owner=...)``), and
``cleanup(owner=...)`` removes only what carries it. The sandbox knows nothing
of agents or of unsee's records: an owner is just a folder (the caller passes
its unsee home), and its id is a random hex string written once into
``<folder>/home_id``.

- :func:`owner_id` reads that id, creating it on first use (atomically: two
  processes opening the same home at once agree on one id).
- ``create=False`` only reads: None when the folder has no id yet (then no
  object on any daemon can carry it).
- :func:`default_home` is the home a command means when none is given:
  ``$UNSEE_HOME``, else ``./.unsee`` (the CLI's rule, restated here because
  the sandbox imports nothing else of unsee).
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from .errors import OwnerIdError

__all__ = ["OWNER_FILE", "owner_id", "default_home"]

#: the file in a home that holds its id
OWNER_FILE = "home_id"
_ID = re.compile(r"[0-9a-f]{32}")


def default_home() -> Path:
    """``$UNSEE_HOME``, else ``./.unsee``."""
    return Path(os.environ.get("UNSEE_HOME") or ".unsee")


def owner_id(home: str | os.PathLike, *, create: bool = True) -> str | None:
    """The id of ``home`` (32 hex digits), from ``<home>/home_id``.

    With ``create`` (the default) a home without one gets one (the folder is
    made if missing); otherwise None is returned for it. Raises
    :class:`~unsee.sandbox.errors.OwnerIdError` when ``home`` is not a folder
    or its id file holds something else than an id (it is never overwritten:
    objects on a daemon may carry the id it held).
    """
    home = Path(home)
    path = home / OWNER_FILE
    found = _read(path)
    if found is not None or not create:
        return found
    try:
        home.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise OwnerIdError(f"the unsee home {home} is not a directory") from exc
    # Write a private temp file, then hard-link it into place: link() never replaces an
    # existing file, so of two processes racing here one wins and both read its id.
    new = secrets.token_hex(16)
    tmp = home / f".{OWNER_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        tmp.write_text(new + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links: exclusive create (a reader may see it empty briefly)
            try:
                with open(path, "x") as f:
                    f.write(new + "\n")
            except FileExistsError:
                pass
    finally:
        tmp.unlink(missing_ok=True)
    found = _read(path)
    if found is None:
        raise OwnerIdError(f"{path} could not be written")
    return found


def _read(path: Path) -> str | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except NotADirectoryError as exc:
        raise OwnerIdError(f"the unsee home {path.parent} is not a directory") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise OwnerIdError(f"{path} cannot be read ({type(exc).__name__})") from exc
    if not _ID.fullmatch(text):
        raise OwnerIdError(f"{path} does not hold a home id (32 hex digits); it is left as it is")
    return text
