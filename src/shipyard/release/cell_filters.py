"""A command's cell filters (--variant, --platform, --component …) checked against the release.

A filter that names nothing must not quietly select zero cells and exit 0: a typo in a CI
job would then build and publish nothing, successfully. Each unknown value is a UsageError
that lists the valid names and suggests the nearest one.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable

from shipyard.errors import UsageError, nearest
from shipyard.release.fields import PackageType
from shipyard.release.spec import Release

_NOUNS = {"variant": "variant name or tag", "platform": "platform or mobile target", "package-type": "package type",
          "component": "component", "python": "Python version", "test-python": "Python version",
          "target": "mobile target"}


def filter_choices(release: Release) -> dict[str, list[str]]:
    """Option -> every value it accepts in this release."""
    variants = list(release.variants)
    return {
        "variant": variants + [v.tag for v in release.variants.values() if v.tag not in variants],
        "platform": [*release.platforms, *release.mobile_targets],
        "package-type": list(typing.get_args(PackageType)),
        "component": list(release.components),
        "python": list(release.pythons),
        "test-python": list(release.pythons),
        "target": list(release.mobile_targets),
    }


def check_filters(release: Release, **filters: str | Iterable[str] | None) -> None:
    """Raise UsageError for the first filter value that names nothing in release.yaml.

    Keys are option names with '_' for '-' (package_type=…); a value may be one name or several.
    """
    choices = filter_choices(release)
    for option, given in filters.items():
        if given is None:
            continue
        option = option.replace("_", "-")
        valid = choices[option]
        for value in [given] if isinstance(given, str) else given:
            if value in valid:
                continue
            hint = nearest(value, valid)
            raise UsageError(f"--{option} {value}: not a {_NOUNS[option]} of release.yaml; use one of "
                             f"{', '.join(valid)}" + (f"; did you mean {hint!r}?" if hint else ""))
