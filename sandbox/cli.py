"""``unsee sandbox ...``: a typer sub-app the main CLI mounts.

    unsee sandbox build-image [--flavor python|busybox] [--tag T] [--force]
    unsee sandbox cleanup [--env ID] [--include-base]

Also runnable as ``python -m unsee.sandbox.cli build-image ...``.
"""

from __future__ import annotations

import time
from typing import Optional

import typer

from .errors import SandboxError

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
    try:
        built = build_image(flavor, tag=tag, force=force, mirror=mirror, cached_only=cached_only)  # type: ignore[arg-type]
    except SandboxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if built is None:
        typer.echo(f"{flavor}: no cached rootfs; not built (run without --cached-only)", err=True)
        raise typer.Exit(2)
    typer.echo(f"{built} ready ({time.monotonic() - t0:.1f} s)")


@app.command("cleanup")
def cleanup_cmd(
    env: Optional[str] = typer.Option(None, help="only this environment id"),
    include_base: bool = typer.Option(False, help="also remove the base images"),
) -> None:
    """Remove every container and image unsee's sandbox made (found by label)."""
    from .docker_env import cleanup

    try:
        report = cleanup(env_id=env, include_base=include_base)
    except SandboxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"removed {report.containers} containers, {report.images} images")
    for line in report.failed:
        typer.echo(f"  not removed: {line}", err=True)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
