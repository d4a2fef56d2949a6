"""emberelastic: the elastic launcher (`ember-run`) for ember.distributed."""

from emberelastic.config import LaunchConfig, UsageError, parse_nnodes

__all__ = ["LaunchConfig", "UsageError", "parse_nnodes", "__version__"]


def _package_version() -> str:
    """The version shipyard stamped (a nightly's development version), else the installed distribution's."""
    import importlib.metadata
    import json
    from pathlib import Path

    stamped = Path(__file__).with_name("_build_info.json")
    if stamped.is_file():
        return str(json.loads(stamped.read_text(encoding="utf-8"))["version"])
    try:
        return importlib.metadata.version("emberelastic")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _package_version()
