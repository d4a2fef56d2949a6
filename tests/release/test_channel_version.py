"""The version an artifact carries on its channel (release/channel_version.py): nightly gets a
PEP 440 development version dated by the commit's UTC day, test and release the plain one."""

from __future__ import annotations

import calendar

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from shipyard.cli import main
from shipyard.errors import ChannelVersionError
from shipyard.release.channel_version import (
    channel_version,
    is_version_of,
    nightly_requirement,
    require_channel_version,
)
from shipyard.wheel.repair import local_version


def _utc(text: str) -> int:
    """Seconds since the epoch of 'YYYY-MM-DD HH:MM:SS' in UTC."""
    date, time = text.split()
    return calendar.timegm((*map(int, date.split("-")), *map(int, time.split(":"))))


DEC_1 = _utc("2026-12-01 12:00:00")


def test_nightly_is_the_plain_version_dated_by_the_commits_utc_day():
    assert channel_version("1.7.0", "nightly", DEC_1) == "1.7.0.dev20261201"
    # The day is UTC's: a commit at 23:30 in New York on 1 December is 2 December.
    assert channel_version("1.7.0", "nightly", _utc("2026-12-02 04:30:00")) == "1.7.0.dev20261202"
    assert channel_version("1.7.0", "nightly", _utc("2026-12-01 23:59:59")) == "1.7.0.dev20261201"
    # A nightly sorts before its release and after the day before's nightly (pip picks the newest).
    assert Version("1.7.0.dev20261130") < Version("1.7.0.dev20261201") < Version("1.7.0")


def test_test_release_and_no_channel_keep_the_plain_version():
    for channel in ("test", "release", None):
        assert channel_version("1.7.0", channel, DEC_1) == "1.7.0"


def test_a_local_label_stays_last():
    assert channel_version("1.7.0+cpu", "nightly", DEC_1) == "1.7.0.dev20261201+cpu"
    # How a wheel is labelled: the variant's tag on the nightly version.
    assert local_version(channel_version("1.7.0", "nightly", DEC_1), "cu118") == "1.7.0.dev20261201+cu118"
    assert local_version(channel_version("1.7.0", "release", DEC_1), "cu118") == "1.7.0+cu118"


def test_a_component_with_its_own_version_gets_the_date_on_its_own():
    assert channel_version("2.0.1", "nightly", DEC_1) == "2.0.1.dev20261201"
    assert channel_version("1.7.0rc1", "nightly", DEC_1) == "1.7.0rc1.dev20261201"


@pytest.mark.parametrize("bad", ["1.7.0.dev3", "seven", "1.7.0-beta-x"])
def test_a_bad_release_version_is_one_line_exit_2(bad):
    with pytest.raises(ChannelVersionError) as error:
        channel_version(bad, "nightly", DEC_1)
    assert error.value.exit_code == 2
    text = str(error.value)
    assert "\n" not in text and bad in text


def test_a_nightly_pins_its_sibling_components_to_their_nightly_versions():
    siblings = ("ember", "emberaudio")
    assert nightly_requirement("ember==1.7.0", siblings, DEC_1) == "ember==1.7.0.dev20261201"
    assert nightly_requirement("Ember>=1.7.0", siblings, DEC_1) == "Ember>=1.7.0.dev20261201"
    marked = nightly_requirement('ember<2,>=1.7.0; python_version >= "3.9"', siblings, DEC_1)
    assert marked == 'ember<2,>=1.7.0.dev20261201; python_version >= "3.9"'
    # Not a component of the release, or no version to follow: as it was.
    assert nightly_requirement("numpy>=1.22", siblings, DEC_1) == "numpy>=1.22"
    assert nightly_requirement("ember", siblings, DEC_1) == "ember"
    # What pip makes of it: the nightly wheel (local label and all) satisfies the rewritten pin, and
    # the plain pin would not have taken it.
    wheel = Version("1.7.0.dev20261201+cpu")
    assert SpecifierSet("==1.7.0.dev20261201").contains(wheel, prereleases=True)
    assert not SpecifierSet("==1.7.0").contains(wheel, prereleases=True)


def test_a_fragment_version_is_the_release_or_one_of_its_nightlies():
    assert is_version_of("1.7.0", "1.7.0")
    assert is_version_of("1.7.0.dev20261201", "1.7.0")
    assert not is_version_of("1.7.1.dev20261201", "1.7.0")
    assert not is_version_of("1.7.0rc1", "1.7.0")


def test_test_and_release_refuse_a_development_version_in_one_line():
    require_channel_version("1.7.0.dev20261201", "nightly", "publish")
    require_channel_version("1.7.0", "nightly", "publish")
    require_channel_version("1.7.0", "test", "publish")
    with pytest.raises(ChannelVersionError) as error:
        require_channel_version("1.7.0.dev20261201", "test", "publish --channel test: dist/manifest.json")
    assert error.value.exit_code == 2
    assert str(error.value) == (
        "publish --channel test: dist/manifest.json: version 1.7.0.dev20261201 is a nightly development version, "
        "and channel test takes plain versions only; build it for test (--publish-channel test), or publish this "
        "build to nightly")


def test_build_for_a_channel_release_yaml_does_not_name_is_one_line_exit_2(repo, capsys):
    code = main(["--root", str(repo), "build", "--variant", "cpu", "--publish-channel", "nightli"])
    err = capsys.readouterr().err
    assert code == 2
    assert " ".join(err.split()) == ("error: --publish-channel nightli: release.yaml names no such channel "
                                     "(channels: nightly, test, release); did you mean 'nightly'?")
