"""``unsee sandbox ...``: a typer sub-app the main CLI mounts.

    unsee sandbox build-image [--flavor python|busybox] [--tag T] [--force]
    unsee sandbox cleanup [--env ID] [--all [--yes] [--include-base]] [--json]

Also runnable as ``python -m unsee.sandbox.cli build-image ...``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from .errors import CleanupNotConfirmed, InvalidCleanup, SandboxError

app = typer.Typer(help="Sandbox environments: build the offline image, clean up.", no_args_is_help=True)


@app.command("build-image")
def build_image_cmd(
    flavor: str = typer.Option("python", help="python (Debian + python3, debootstrap) or busybox (tiny, no python3)"),
    tag: Optional[str] = typer.Option(None, help="image tag (default unsee-sandbox:latest / unsee-sandbox:busybox)"),
    force: bool = typer.Option(False, help="rebuild even if the tag exists"),
    mirror: Optional[str] = typer.Option(None, help="Debian mirror (default: from /etc/apt/sources.list)"),
    cached_only: bool = typer.Option(False, help="python flavor: only import a cached rootfs, never debootstrap"),
) -> None:
    """Build the sandbox image from local material (idempotent, cached)."""
    from .image import build_image

    if flavor not in ("python", "busybox"):
        raise typer.BadParameter("flavor must be python or busybox")
    t0 = time.monotonic()
    built = build_image(flavor, tag=tag, force=force, mirror=mirror, cached_only=cached_only)  # type: ignore[arg-type]
    if built is None:
        typer.echo(f"{flavor}: no cached rootfs; not built (run without --cached-only)", err=True)
        raise typer.Exit(2)
    typer.echo(f"{built} ready ({time.monotonic() - t0:.1f} s)")


@app.command("cleanup")
def cleanup_cmd(
    ctx: typer.Context,
    env: Optional[str] = typer.Option(None, help="only this environment id (and its shadows)"),
    all_homes: bool = typer.Option(False, "--all", help="every home's objects on the daemon, and those of no home "
                                   "(asks first unless --yes)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="with --all: do not ask"),
    include_base: bool = typer.Option(False, help="with --all: also remove the base images (shared by every home)"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Remove the containers and images this home's sandboxes made (found by the home's label).

    The home is `unsee --home`, else $UNSEE_HOME, else ./.unsee. Other homes' objects on the same
    daemon are left alone, and so are objects with no home label (made before homes were
    labelled): --all removes every unsee object on the daemon. Exit codes: 0 done; 1 something
    could not be removed, or --all was not confirmed; 2 bad flags or home; 3 no daemon.
    """
    from .docker_cleanup import CleanupReport, cleanup, count_unowned
    from .owner import owner_id

    # Errors are raised, typed (each states its exit code): the entry point prints them
    # (unsee's main, or main() below when run on its own).
    if include_base and not all_homes:
        raise InvalidCleanup("--include-base needs --all: the base images are shared by every home on the daemon")
    home = None if all_homes else _home(ctx)
    hid = None if home is None else owner_id(home, create=False)  # reading makes no id
    if all_homes:
        if not yes and not _confirmed():
            raise CleanupNotConfirmed("--all was not confirmed; nothing removed (--yes does not ask)")
        report = cleanup(env_id=env, everything=True, include_base=include_base)
    elif hid is None:  # no sandbox of this home ever ran: nothing can carry its id
        report = CleanupReport(0, 0, (), count_unowned())
    else:
        report = cleanup(owner=hid, env_id=env)
    if as_json:
        typer.echo(json.dumps({"scope": "all" if all_homes else "home", "home": home and str(home),
                               "home_id": hid, "env": env, **report.to_dict()}))
    else:
        where = "the whole daemon" if all_homes else f"home {home}"
        typer.echo(f"removed {report.containers} containers, {report.images} images ({where})")
        if report.unowned:
            typer.echo(f"kept {report.unowned} unsee objects with no home label (made before homes were labelled); "
                       "`unsee sandbox cleanup --all` removes them")
        for line in report.failed:
            typer.echo(f"  not removed: {line}", err=True)
    if report.failed:
        raise typer.Exit(1)  # done, but the answer is "no": something stays


def _confirmed() -> bool:
    """Ask on stderr (stdout stays the --json document); no answer (no terminal, EOF) is no."""
    try:
        return typer.confirm("remove every unsee container and image on this Docker daemon, "
                             "other homes' and users' included?", default=False, err=True)
    except typer.Abort:
        typer.echo("", err=True)  # end the prompt's line: the error goes on its own
        return False


def _home(ctx: typer.Context) -> Path:
    """The home this command is for: the root command's ``--home`` when mounted in ``unsee``
    (read from the click context: the sandbox imports nothing of unsee), else the default."""
    from .owner import default_home

    given = ctx.find_root().params.get("home")
    return Path(given) if given else default_home()


def main() -> None:
    """``python -m unsee.sandbox.cli``: a typed error is one line and its exit code (unsee's own
    CLI, which mounts ``app``, prints them itself: JSON with --json, the traceback with --debug)."""
    try:
        app()
    except SandboxError as exc:
        typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(getattr(exc, "exit_code", 1))


if __name__ == "__main__":
    main()
