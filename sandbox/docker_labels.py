"""The labels the Docker backend puts on what it makes, so that cleanup finds it by label
(:mod:`.docker_env` sets them, :mod:`.docker_cleanup` selects by them)."""

from __future__ import annotations

__all__ = ["LABEL_SANDBOX", "LABEL_ENV", "LABEL_ROLE", "LABEL_PARENT", "LABEL_HOME", "OWN_LABELS", "SNAPSHOT_REPO"]

LABEL_SANDBOX = "unsee.sandbox"
LABEL_ENV = "unsee.env"
LABEL_ROLE = "unsee.role"
LABEL_PARENT = "unsee.parent"
#: the owner id (an unsee home's, :func:`unsee.sandbox.owner.owner_id`) on what an owned environment makes
LABEL_HOME = "unsee.home"
#: the labels the backend sets itself: never copied from an image's config into a new one
OWN_LABELS = (LABEL_ROLE, LABEL_ENV, LABEL_SANDBOX, LABEL_PARENT, LABEL_HOME)
SNAPSHOT_REPO = "unsee-snap"
