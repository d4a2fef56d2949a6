"""The command line as users of other tools expect it: `--version`, the global options after the
command too, help for every option, counts said in good English."""

from __future__ import annotations

import argparse
import shutil
from importlib.metadata import version
from pathlib import Path

import pytest

from shipyard.cli import build_parser, main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pipeline"  # one component, one feature


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"shipyard {version('shipyard')}\n"


def test_global_options_work_after_the_command_and_win_there(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no release.yaml here: only --root can find one
    assert main(["validate", "--root", str(FIXTURE)]) == 0
    after = capsys.readouterr().out
    assert main(["--root", str(FIXTURE), "validate"]) == 0
    assert capsys.readouterr().out == after
    assert main(["--root", str(tmp_path / "nowhere"), "validate", "--root", str(FIXTURE)]) == 0
    assert main(["ci", "check", "--root", str(tmp_path), "-v"]) == 2  # a command group's command takes them too
    assert "release.yaml" in capsys.readouterr().err


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("shipyard",)):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, command in action.choices.items():
                yield (*path, name), helps.get(name), command
                yield from _commands(command, (*path, name))


def test_every_command_and_every_option_says_what_it_does() -> None:
    parser = build_parser()
    silent = [" ".join(path) for path, help_text, _ in _commands(parser) if not help_text]
    for path, _, command in [(("shipyard",), None, parser), *_commands(parser)]:
        silent += [f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest}" for a in command._actions
                   if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not a.help]
    assert silent == []


def test_validate_counts_in_good_english(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(FIXTURE), "validate"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(1 component, 1 variant, 2 features, 1 cell)" in out, out
    root = shutil.copytree(FIXTURE, tmp_path / "release")
    release = root / "release.yaml"
    # A platform's os follows from its name (linux-x86_64); one named otherwise must say it.
    release.write_text(release.read_text().replace("  linux-x86_64:\n    os: linux\n", "  builder:\n", 1))
    assert main(["--root", str(root), "validate"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "required key is missing; add the line 'os:' here" in err, err
