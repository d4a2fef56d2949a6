"""Mobile artifacts: ember-lite built, tested (natively or under qemu) and packaged for
host, linux-aarch64, linux-armv7 and the Android ABIs."""

from shipyard.mobile.build import MobileResult, build_mobile
from shipyard.mobile.packaging import FeatureEntry
from shipyard.mobile.targets import MobileBuildTarget

__all__ = ["FeatureEntry", "MobileResult", "MobileBuildTarget", "build_mobile"]
