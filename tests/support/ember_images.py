"""ember's images as the suite builds them: each variant's wheels for the images' Python, then its
images with shipyard's image pipeline, once per session (the `ember_images` fixture of conftest.py).

test_docker_image.py tests these images, and the end-to-end publish (test_publish_release.py)
publishes the same CPU runtime image: they share one xdist worker (the "ember_images" group,
conftest.py's SHARED_BUILDS) and this one build. The wheels come from shipyard's build cache in the
suite's session state folder (conftest's suite_state), shared with the other release builds of the
suite; `nox -s docker-<variant>` instead points the images at the tested wheels of dist/ that the
session built just before (SHIPYARD_IMAGE_TESTED_WHEELS=1), and records the images there.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from shipyard.host.toolchains.obtain import install_toolchain_if_obtainable
from shipyard.image.build import ImageRequest, build_images
from shipyard.image.plan import ImageResult
from shipyard.release.spec import Spec
from shipyard.wheel.build_request import BuildRequest
from shipyard.wheel.variant_wheels import build_variant

REPO = Path(__file__).resolve().parents[2]


class EmberImages:
    """Per variant a dist with its wheels, and its images, each built once; the builds are printed
    with their time and size (pytest -s)."""

    def __init__(self, spec: Spec, tmp_path_factory: pytest.TempPathFactory, state: Path) -> None:
        self.spec = spec
        self._tmp = tmp_path_factory
        self._state = state
        self._dists: dict[str, Path] = {}
        self.results: dict[tuple[str, str], ImageResult] = {}

    @property
    def tested_wheels(self) -> bool:
        return bool(os.environ.get("SHIPYARD_IMAGE_TESTED_WHEELS"))

    def dists(self, variant: str) -> Path:
        """A dist folder with the variant's wheels for the images' Python and their manifest."""
        if self.tested_wheels:
            return REPO / "dist"  # nox -s docker-<variant> built and tested them there
        if variant not in self._dists:
            settings = self.spec.release.images
            assert settings is not None
            dist = self._tmp.mktemp(f"dist-{variant}")
            # As `shipyard build --install-toolchain` does: on a bare machine no other test may
            # have assembled the variant's CUDA toolkit yet.
            install_toolchain_if_obtainable(self.spec, variant, lambda _: None)
            # The images' platform's wheels only (not linux-x86_64-manylinux2014's: the images hold
            # what pip picks in them by name).
            outcomes = build_variant(self.spec, BuildRequest(variant=variant, pythons=(settings.python,),
                                                             components=settings.components,
                                                             platforms=(settings.platform,), run_tests=False,
                                                             dist=dist, state=self._state))
            assert all(o.result in ("built", "cached") for o in outcomes), [(o.cell.id, o.detail) for o in outcomes]
            self._dists[variant] = dist
        return self._dists[variant]

    def request(self, variant: str, targets: tuple[str, ...]) -> ImageRequest:
        return ImageRequest(variant=variant, dist=self.dists(variant), targets=targets,
                            allow_untested=not self.tested_wheels)

    def get(self, variant: str, target: str = "runtime") -> ImageResult:
        if (variant, target) not in self.results:
            start = time.monotonic()
            for result in build_images(self.spec, self.request(variant, (target,))):
                self.results[(variant, result.plan.target)] = result
            print(f"\nimage {variant} {target}: {time.monotonic() - start:.0f} s, "
                  f"{self.results[(variant, target)].size_mb:.0f} MB")
        return self.results[(variant, target)]
