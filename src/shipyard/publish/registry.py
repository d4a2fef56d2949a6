"""Images in a docker registry, tagged per channel (not finished: images land with issue #12).

The design, behind the same interface as the other targets: the manifest's artifacts of package
type `image` (name = the image's tag, sha256 = its manifest digest, path = a `docker save`
archive) are loaded and pushed with the docker SDK to `<url>/<repo>:<version>-<variant>-<kind>-
<channel>-staging`; each is pulled back by digest and compared; then the channel tag
(`…-<channel>`) is written last, one registry PUT of the same manifest per image, so a tag only
ever names a complete, verified image.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shipyard.publish.errors import PublishError
from shipyard.publish.plan import PublishFile
from shipyard.publish.target import Backend, Listed


class RegistryBackend(Backend):
    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        return []

    def fetch(self, listed: Listed, dest: Path) -> Path:
        raise PublishError(f"{self.target.name}: pulling images for promotion is not implemented yet (issue #12)")

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        raise PublishError(f"{self.target.name}: publishing images ({', '.join(f.filename for f in files)}) is not "
                           f"implemented yet (issue #12); publish the other targets with --target")
