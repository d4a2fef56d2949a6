"""Malformed release descriptions through the real CLI: exit 2, one line per problem, never a traceback.

Each case breaks one thing in a copy of the real release.yaml / feature_status.yaml (a key's
type, its shape, its value, or the file itself) and runs `shipyard validate`. Every error line
must read `file:line: key: message; fix (got value)`, and name the key that was broken, at the
line where it stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.release_copy import SpecCopy

from shipyard.cli import main
from shipyard.errors import SpecError
from shipyard.release.validate import load_spec

R, F = "release.yaml", "feature_status.yaml"
# An Ed25519 private key in PEM, as a user might paste it (generated for this test, used nowhere).
PEM = ("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHq7bKfQ2m9s0Yx1nJv4cT8wLpR3aZ6eU5iO0dGhKjNl\n"
       "-----END PRIVATE KEY-----")

# file[:line]: key: message; fix — the fix is whatever follows the first "; ".
LINE = re.compile(r"^(?P<file>/\S+?)(?::(?P<line>\d+))?: (?P<key>\([a-z ]+\)|[^ ]+): (?P<message>.+?); (?P<fix>.+)$")


@dataclass(frozen=True)
class Case:
    name: str
    file: str
    old: str
    new: str
    key: str  # the key the error must name
    says: str  # a fragment of the message
    at: str | None = None  # text on the line the error must point at (default: the edited text)
    got: str | None = None  # the value the error must show, as shown
    hidden: str | None = None  # a secret nothing may echo; without `got`, the line says "(value hidden: ...)"


def _cases() -> list[Case]:
    c = Case
    return [
        # Where the provenance key comes from: a file or a variable's name, never the key.
        c("supply chain names no key", R, "  signing_key_file: .shipyard/keys/provenance-ed25519.pem\n"
          "  signing_key_env: SHIPYARD_SIGNING_KEY\n", "", "supply_chain", "needs signing_key_file",
          at="supply_chain:"),
        # The key itself pasted where the variable's name belongs: refused, and never echoed.
        c("signing key env holds the key", R, "signing_key_env: SHIPYARD_SIGNING_KEY",
          f"signing_key_env: |\n    {PEM.replace(chr(10), chr(10) + '    ')}", "supply_chain.signing_key_env",
          "NAME of an environment variable", at="signing_key_env: |", hidden="MC4CAQAwBQYDK2VwBCIEI"),
        c("signing key file outside the repository and home", R,
          "signing_key_file: .shipyard/keys/provenance-ed25519.pem", "signing_key_file: /etc/shadow",
          "supply_chain.signing_key_file", "outside the repository and your home", got="'/etc/shadow'"),
        # The file itself.
        c("binary file", R, "", "", "(file)", "binary file", at="\0"),
        c("invalid UTF-8", R, "# The ember 1.7.0", "# The \xff ember", "(file)", "not UTF-8 text", at="\xff"),
        c("release.yaml is a directory", R, "", "", "(file)", "is a directory"),
        c("feature_status.yaml missing", F, "", "", "(file)", "file not found"),
        c("empty file", R, "", "", "(file)", "the file is empty"),
        c("unclosed bracket", R, 'pythons: ["3.9",', 'pythons: [["3.9",', "(syntax)", "not valid YAML", at=""),
        c("control character", R, "  name: ember\n", "  name: ember\x07\n", "(file)", "character YAML does not allow",
          at="name: ember"),
        c("duplicate key", R, "  cpu:\n    tag: cpu\n", "  cpu:\n    tag: cpu\n    tag: cpu\n", "variants.cpu.tag",
          "duplicate key", at="    tag: cpu\n  cuda10.2:"),
        c("merge key with a scalar", R, "  cpu:\n    tag: cpu\n", "  cpu:\n    <<: 5\n    tag: cpu\n",
          "variants.cpu.<<", "merge key '<<' takes a mapping", at="<<: 5"),
        c("python object tag", R, "  name: ember\n", "  name: !!python/object:os.system ls\n", "release.name",
          "value cannot be read", at="name: !!python"),
        c("list as a key", R, "  name: ember\n", "  name: ember\n  ? [a, b]\n  : c\n", "release",
          "a key must be a plain name", at="? [a, b]"),
        c("alias bomb", R, "schema_version: 1\n", "schema_version: 1\nx0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
          + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 7)),
          "x4", "more than 100000 values", at="x4:"),
        c("top level is a list", R, "", "", "(top level)", "must be a mapping", at="- just"),
        # release.yaml: each key's type, shape and value.
        c("schema_version 2", R, "schema_version: 1\n", "schema_version: 2\n", "schema_version",
          "reads schema_version 1 only", got="2"),
        c("schema_version missing", R, "schema_version: 1\n", "", "schema_version", "required key is missing",
          at="release:\n  name"),
        c("unknown top-level key", R, "release:\n", "relase:\n", "relase", "unknown key 'relase'", at="relase:"),
        c("release is a list", R, "release:\n  name: ember\n  version: 1.7.0\n",
          "release: [ember, 1.7.0]\nxrelease:\n", "release", "must be a mapping"),
        c("release name with spaces", R, "  name: ember\n", "  name: Ember Lib\n", "release.name",
          "must be lowercase letters", got="'Ember Lib'"),
        c("version not PEP 440", R, "  version: 1.7.0\n", "  version: one\n", "release.version",
          "not a PEP 440 version", got="'one'"),
        c("version as a float", R, "  version: 1.7.0\n", "  version: 1.10\n", "release.version",
          'quote it: "1.10"', got="1.10"),
        c("size budget negative", R, "  wheel_size_budget_mb: 40\n", "  wheel_size_budget_mb: -1\n",
          "release.wheel_size_budget_mb", "must be greater than 0", got="-1"),
        c("size budget infinite", R, "  wheel_size_budget_mb: 40\n", "  wheel_size_budget_mb: .inf\n",
          "release.wheel_size_budget_mb", "must be a finite number", got=".inf"),
        c("variant size budget not a number", R, "    host_gcc_max: 11\n    wheel_size_budget_mb: 120\n",
          "    host_gcc_max: 11\n    wheel_size_budget_mb: .nan\n", "variants.cuda11.wheel_size_budget_mb",
          "must be a finite number", at="wheel_size_budget_mb: .nan", got=".nan"),
        c("image budget negative", R, "      runtime_budget_mb: 320\n", "      runtime_budget_mb: -320\n",
          "images.variants.cpu.runtime_budget_mb", "must be greater than 0", got="-320"),
        c("size budget text", R, "  wheel_size_budget_mb: 40\n", "  wheel_size_budget_mb: big\n",
          "release.wheel_size_budget_mb", "must be a number", got="'big'"),
        c("components a list", R, "components:\n  ember:\n", "components: []\nxcomponents:\n  ember:\n",
          "components", "must be a mapping", at="components: []"),
        c("component kind a number", R, "    kind: python-pure", "    kind: 5", "components.emberaudio.kind",
          "must be one of python-native, python-pure, native", got="5"),
        c("import_name not an identifier", R, "    import_name: emberaudio\n", "    import_name: 2audio\n",
          "components.emberaudio.import_name", "must be a Python identifier", got="'2audio'"),
        c("package_types a string", R, "    import_name: emberaudio\n    package_types: [wheel, conda]\n",
          "    import_name: emberaudio\n    package_types: wheel\n", "components.emberaudio.package_types",
          "must be a list", at="package_types: wheel"),
        c("package_types empty", R, "    import_name: emberaudio\n    package_types: [wheel, conda]\n",
          "    import_name: emberaudio\n    package_types: []\n", "components.emberaudio.package_types",
          "must not be empty", at="package_types: []"),
        c("package type typo", R, "    import_name: emberaudio\n    package_types: [wheel, conda]\n",
          "    import_name: emberaudio\n    package_types: [whl]\n", "components.emberaudio.package_types.0",
          "must be one of wheel, mobile, conda, docker", at="package_types: [whl]", got="'whl'"),
        c("native component as a wheel", R, "    package_types: [mobile]\n", "    package_types: [wheel]\n",
          "components.ember-lite", "a native component cannot be packaged as wheel", at="  ember-lite:"),
        c("python component as mobile", R, "    import_name: emberaudio\n    package_types: [wheel, conda]\n",
          "    import_name: emberaudio\n    package_types: [mobile]\n", "components.emberaudio",
          "a python-pure component cannot be packaged as mobile", at="  emberaudio:"),
        c("native_core a string", R, "    native_core:\n      source: core\n      prefix_define: EMBER_CORE_PREFIX\n",
          "    native_core: core\n", "components.ember.native_core", "must be a mapping", got="'core'"),
        c("prefix_define lowercase", R, "      prefix_define: EMBER_CORE_PREFIX\n", "      prefix_define: ember\n",
          "components.ember.native_core.prefix_define", "NAME of an environment variable", got="'ember'"),
        c("cuda_kernels not a bool", R, "    cuda_kernels: true\n    tests: tests\n  embervision:",
          "    cuda_kernels: yes please\n    tests: tests\n  embervision:", "components.ember.cuda_kernels",
          "must be true or false", got="'yes please'"),
        # Any PEP 517 project as a component: its requires-python, test requirements, version, tests.
        c("requires_python not a specifier", R, "    import_name: emberaudio\n",
          "    import_name: emberaudio\n    requires_python: 3.11+\n", "components.emberaudio.requires_python",
          "not a PEP 440 version specifier", at="requires_python:", got="'3.11+'"),
        c("requires_python a number", R, "    import_name: emberaudio\n",
          "    import_name: emberaudio\n    requires_python: 3.11\n", "components.emberaudio.requires_python",
          "given as a number", at="requires_python:", got="3.11"),
        c("test_requires not PEP 508", R, "    import_name: emberaudio\n",
          "    import_name: emberaudio\n    test_requires: [\"attrs>>=23\"]\n",
          "components.emberaudio.test_requires.0", "not a PEP 508 requirement", at="test_requires", got="'attrs>>=23'"),
        c("component version not PEP 440", R, "    import_name: emberaudio\n",
          "    import_name: emberaudio\n    version: newest\n", "components.emberaudio.version",
          "not a PEP 440 version", at="version: newest", got="'newest'"),
        c("tests folder outside the release", R, "    tests: tests\n  emberelastic:",
          "    tests: ../../../elsewhere\n  emberelastic:", "components.emberaudio.tests",
          "outside the release", at="tests: ../../../elsewhere", got="'../../../elsewhere'"),
        c("tests folder missing", R, "    tests: tests\n  emberelastic:", "    tests: tset\n  emberelastic:",
          "components.emberaudio.tests", "the tests folder does not exist", at="tests: tset", got="'tset'"),
        c("console script not an entry-point name", R, "console_scripts: [ember-run]",
          "console_scripts: [ember run]", "components.emberelastic.console_scripts.0",
          "must be a console-script name", got="'ember run'"),
        c("console script that looks like an option", R, "console_scripts: [ember-run]",
          "console_scripts: [--run]", "components.emberelastic.console_scripts.0",
          "must be a console-script name", got="'--run'"),
        c("test_requires on a native component", R, "    package_types: [mobile]\n",
          "    package_types: [mobile]\n    test_requires: [attrs]\n", "components.ember-lite",
          "apply to Python packages", at="  ember-lite:"),
        c("component folder missing", R, "    path: library/emberaudio\n", "    path: library/nowhere\n",
          "components.emberaudio.path", "folder does not exist", got="'library/nowhere'"),
        c("arch_list names no arch", R, '    arch_list: "3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0"\n', '    arch_list: ";"\n',
          "variants.cuda11", "names no GPU arch", at="  cuda11:"),
        c("arch twice", R, '    arch_list: "3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0"\n', '    arch_list: "8.0;8.0"\n',
          "variants.cuda11.arch_list", "an arch appears twice", got="'8.0;8.0'"),
        c("cuda as a float", R, '    cuda: "11.8"\n', "    cuda: 11.8\n", "variants.cuda11.cuda",
          'quote it: "11.8"', got="11.8"),
        c("unknown cuda version", R, '    tag: cu118\n    cuda: "11.8"\n', '    tag: cu117\n    cuda: "11.7"\n',
          "variants.cuda11.cuda", "unknown CUDA version", at='cuda: "11.7"', got="'11.7'"),
        c("tag pattern", R, "    tag: cu118\n", "    tag: gpu\n", "variants.cuda11.tag", "must be 'cpu' or 'cu'",
          got="'gpu'"),
        c("host_gcc_max text", R, "    host_gcc_max: 11\n", "    host_gcc_max: eleven\n",
          "variants.cuda11.host_gcc_max", "must be a whole number", got="'eleven'"),
        c("host_gcc_max too small", R, "    host_gcc_max: 11\n", "    host_gcc_max: 2\n",
          "variants.cuda11.host_gcc_max", "must be at least 4", got="2"),
        c("cpu variant with an arch list", R, "  cpu:\n    tag: cpu\n", '  cpu:\n    tag: cpu\n    arch_list: "8.0"\n',
          "variants.cpu", "sets arch_list/host_gcc_max but no cuda version", at="  cpu:"),
        c("duplicate tag", R, "  cuda12:\n", '  cuda11b:\n    tag: cu118\n    cuda: "11.8"\n    arch_list: "8.0"\n'
          "  cuda12:\n", "variants.cuda11b.tag", "tag is already used by variant 'cuda11'",
          at='    tag: cu118\n    cuda: "11.8"\n    arch_list: "8.0"\n  cuda12'),
        c("platform os typo", R, "    os: linux\n", "    os: linx\n", "platforms.linux-x86_64.os",
          "must be one of linux, windows, macos", got="'linx'"),
        c("platform tag for another arch", R, "    wheel_platform_tag: manylinux_2_31_x86_64\n",
          "    wheel_platform_tag: manylinux_2_31_aarch64\n", "platforms.linux-x86_64.wheel_platform_tag",
          "is a tag for aarch64, but the platform's arch is x86_64", got="'manylinux_2_31_aarch64'"),
        c("platform tag for another os", R, "    wheel_platform_tag: manylinux_2_31_x86_64\n",
          "    wheel_platform_tag: win_amd64\n", "platforms.linux-x86_64.wheel_platform_tag",
          "is a windows tag, but the platform's os is linux", got="'win_amd64'"),
        c("platform tag not a tag", R, "    wheel_platform_tag: macosx_11_0_arm64\n",
          "    wheel_platform_tag: macos-arm64\n", "platforms.macos-arm64.wheel_platform_tag",
          "not a wheel platform tag", got="'macos-arm64'"),
        # A missing runner follows from the platform's name (spec.PLATFORM_DEFAULTS); an empty one is an error.
        c("platform runner empty", R, "    github_runner: macos-14\n", "    github_runner:\n",
          "platforms.macos-arm64.github_runner", "must be text", at="    github_runner:\n"),
        c("mobile toolchain typo", R, "    toolchain: host ", "    toolchain: hots ",
          "mobile_targets.host.toolchain", "must be one of android-ndk, cross-gcc, host", got="'hots'"),
        c("stands_in_for typo", R, "    stands_in_for: android-arm64-v8a\n", "    stands_in_for: android-arm64\n",
          "mobile_targets.linux-aarch64.stands_in_for", "names no mobile target", got="'android-arm64'"),
        c("pythons a string", R, 'pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]', 'pythons: "3.11"',
          "pythons", "must be a list", got="'3.11'"),
        c("python 3.10 as a float", R, 'pythons: ["3.9", "3.10",', 'pythons: ["3.9", 3.10,', "pythons.1",
          'quote it: "3.10"', at="pythons:", got="3.10"),
        c('python "3.1" quoted', R, 'pythons: ["3.9", "3.10",', 'pythons: ["3.9", "3.1",', "pythons.1",
          "Python 3.1 is not one shipyard builds for", at="pythons:", got="'3.1'"),
        c("unsupported python", R, '"3.13"]', '"3.13", "3.99"]', "pythons.5",
          "Python 3.99 is not one shipyard builds for", at="pythons:", got="'3.99'"),
        c("pythons empty", R, 'pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]', "pythons: []", "pythons",
          "must not be empty"),
        c("python twice", R, '"3.12", "3.13"]', '"3.12", "3.12"]', "pythons", "appears twice", at="pythons:"),
        c("exclusions a mapping", R, "exclusions:\n  - variant: \"cuda*\"\n",
          "exclusions:\n  x:\n    variant: \"cuda*\"\nxexclusions:\n  - variant: \"cuda*\"\n",
          "exclusions", "must be a list", at="exclusions:"),
        c("exclusion selects nothing", R, "exclusions:\n", "exclusions:\n  - reason: no selector at all\n",
          "exclusions.0", "an exclusion selects nothing", at="- reason: no selector"),
        c("exclusion reason too short", R, "    reason: no CUDA on macOS\n", "    reason: x\n",
          "exclusions.0.reason", "at least 3 characters", got="'x'"),
        c("exclusion selector a mapping", R, '  - variant: "cuda*"\n    platform: macos-arm64\n',
          '  - variant: {a: b}\n    platform: macos-arm64\n', "exclusions.0.variant", "expected a name or a list",
          at="variant: {a: b}"),
        c("exclusion typo", R, "  - variant: cuda10.2\n", "  - variant: cuda10.3\n", "exclusions.3.variant",
          "matches no variant", got="'cuda10.3'"),
        c("exclusion shadowed", R, "publish:\n", "  - variant: cuda11\n    platform: macos-arm64\n"
          "    reason: covered by the first one\n\npublish:\n", "exclusions.7",
          "already removed by exclusions.0 (no CUDA on macOS)", at="  - variant: cuda11\n"),
        c("exclusion matches no cell", R, "exclusions:\n", "exclusions:\n  - component: emberaudio\n"
          "    package_type: mobile\n    reason: audio is not a mobile package\n", "exclusions.0",
          "matches no cell of the matrix", at="- component: emberaudio"),
        c("publish kind typo", R, "    kind: devpi\n", "    kind: npm\n", "publish.pypi.kind",
          "must be one of devpi, pypi, static, conda, docker", at="kind: npm"),
        # The devpi target as it was written before #29 named its kind pypi: both ways out are named.
        c("publish devpi under its old kind", R, "    kind: devpi\n", "    kind: pypi\n", "publish.pypi",
          "a pypi target speaks the upload API; set index_url to its simple index (e.g. "
          "https://pypi.example.org/simple/); a devpi server with staging indexes is kind: devpi",
          at="  pypi:"),
        c("publish channels typo", R, "    default_variant: cpu\n",
          "    default_variant: cpu\n    channels: [relase]\n",
          "publish.pypi.channels.0", "names no channel", at="channels: [relase]"),
        c("publish a list", R, "\npublish:\n", "\npublish: [a]\nxpublish:\n",
          "publish", "must be a mapping", at="publish: [a]"),
        c("publish unknown key", R, "    kind: devpi\n", "    kind: devpi\n    endpoint: somewhere\n",
          "publish.pypi.endpoint", "unknown key 'endpoint'", at="endpoint:"),
        c("publish inline token", R, "    token_env: SHIPYARD_CONDA_TOKEN\n",
          "    token_env: SHIPYARD_CONDA_TOKEN\n    api-token: abc123\n", "publish.conda-channel",
          "'api-token' holds a secret inline", at="  conda-channel:"),
        c("publish url with credentials", R, "    url: http://127.0.0.1:8081/\n",
          "    url: http://me:pw@127.0.0.1:8081/\n", "publish.pypi.url", "the URL carries credentials",
          at="url: http://me"),
        c("publish url not a url", R, "    url: http://127.0.0.1:8081/\n", "    url: not a url at all\n",
          "publish.pypi.url", "not a URL", got="'not a url at all'"),
        c("publish url with a token in its query", R, "    url: http://127.0.0.1:8083/whl/\n",
          "    url: http://127.0.0.1:8083/whl/?token=Zq8vLw2Kp0aB\n", "publish.wheels-tree.url",
          "carries a query or fragment", got="'http://127.0.0.1:8083/whl/'", hidden="Zq8vLw2Kp0aB"),
        c("publish url scheme the target cannot speak", R, "    url: http://127.0.0.1:8082/conda/\n",
          "    url: ftp://127.0.0.1:8082/conda/\n", "publish.conda-channel.url",
          "a conda target speaks http:// or https://, not ftp://", got="'ftp://127.0.0.1:8082/conda/'"),
        c("publish registry with a bad port", R, "    url: 127.0.0.1:5000\n", "    url: 127.0.0.1:500000\n",
          "publish.images.url", "not a URL", got="'127.0.0.1:500000'"),
        c("conda channel with a token", R, "channels: [conda-forge]",
          "channels: [conda-forge, 'https://conda.example.org/t/tk-Zq8vLw2Kp0aB/main']", "conda.channels.1",
          "a channel URL carries credentials", got="'https://conda.example.org/t/***/main'", hidden="Zq8vLw2Kp0aB"),
        # A tool command is an argv list: a string a shell or CMake would split is refused.
        c("emulator that a shell would split", R, "    emulator: [qemu-arm, -L, /usr/arm-linux-gnueabihf]\n",
          '    emulator: "qemu-arm; echo pwned"\n', "mobile_targets.linux-armv7.emulator.0",
          "would split it", got="'qemu-arm; echo pwned'"),
        c("publish env name is a value", R, "    password_env: SHIPYARD_PYPI_PASSWORD\n",
          "    password_env: hunter2-literal\n", "publish.pypi.password_env",
          "NAME of an environment variable", at="password_env:"),
        # feature_status.yaml
        c("features a mapping", F, "features:\n  - id: ember.kernels\n",
          "features:\n  x: 1\nxfeatures:\n  - id: ember.kernels\n", "features", "must be a list", at="features:"),
        c("feature id pattern", F, "  - id: ember.fft\n", "  - id: Ember FFT\n", "features.2.id",
          "must be lowercase dotted words", got="'Ember FFT'"),
        c("feature title short", F, "    title: NumPy-compatible ember.fft\n", "    title: x\n", "features.2.title",
          "at least 3 characters", got="'x'"),
        c("feature component typo", F, "component: embervision\n", "component: embervison\n",
          "features.14.component", "names no component", got="'embervison'"),
        c("feature since not a version", F, "    since: 1.7.0\n", "    since: soon\n", "features.0.since",
          "not a PEP 440 version", got="'soon'"),
        c("feature since later than the release", F, "    since: 1.7.0\n", "    since: 1.8.0\n", "features.0.since",
          "later than the release (1.7.0)", got="'1.8.0'"),
        c("feature status typo", F, "    status: stable\n", "    status: stabel\n", "features.0.status.*",
          "must be one of stable, beta, prototype", at="status: stabel", got="'stabel'"),
        c("feature status platform typo", F, "status: {windows-amd64: prototype}", "status: {windows-amd46: prototype}",
          "features.10.status.windows-amd46", "names no platform or mobile target", got="'windows-amd46'"),
        c("feature status empty", F, "status: {windows-amd64: prototype}", "status: {}", "features.10.status",
          "must not be empty"),
        c("stable on a platform the component is excluded from", F,
          "    component: emberelastic\n    since: 1.7.0\n    status: stable\n",
          "    component: emberelastic\n    since: 1.7.0\n    status: {linux-x86_64: stable, windows-amd64: beta}\n",
          "features.11.status.windows-amd64", "beta on windows-amd64, where emberelastic is excluded (exclusions.2",
          at="stable, windows-amd64: beta}", got="'beta'"),
        c("feature tests empty", F, "    tests:\n      - library/ember/tests/test_fft.py\n", "    tests: []\n",
          "features.2.tests", "must not be empty"),
        c("feature test outside the repository", F, "      - library/ember/tests/test_fft.py\n",
          "      - /etc/passwd\n", "features.2.tests.0", "not a test id", got="'/etc/passwd'"),
        c("duplicate feature id", F, "  - id: ember.fft\n", "  - id: ember.kernels\n", "features.2.id",
          "duplicate feature id", at="  - id: ember.kernels\n    title: NumPy"),
    ]


def _break(root: Path, case: Case) -> str:
    """Apply the case to a fresh copy under `root`; return the text its error must point at."""
    spec = SpecCopy(root)
    path = root / case.file
    if case.name == "binary file":
        path.write_bytes(b"schema_version: 1\n" + bytes(range(256)))
    elif case.name == "release.yaml is a directory":
        path.unlink()
        path.mkdir()
    elif case.name == "feature_status.yaml missing":
        path.unlink()
    elif case.name == "empty file":
        path.write_text("# nothing here\n")
    elif case.name == "top level is a list":
        path.write_text("- just\n- a list\n")
    elif case.name == "invalid UTF-8":
        text = path.read_text().replace(case.old, case.new, 1)
        path.write_bytes(text.encode("utf-8").replace("\xff".encode(), b"\xff"))
    else:
        spec.edit(case.file, case.old, case.new)
    return case.at if case.at is not None else case.new.strip().splitlines()[0] if case.new.strip() else ""


def _line_of(path: Path, needle: str) -> int | None:
    if not needle or not path.is_file():
        return None
    data = path.read_bytes()
    at = data.find(needle.encode("utf-8"))
    at = at if at >= 0 else data.find(needle.encode("latin-1", "ignore"))  # the raw byte \xff
    return data.count(b"\n", 0, at) + 1 if at >= 0 else None


def _problems(case: Case, root: Path, needle: str, rc: int, out: str, err: str) -> list[str]:
    """What is wrong with shipyard's answer to this case (nothing, if it is a clear error)."""
    problems = []
    if rc != 2:
        problems.append(f"exit status {rc}, not 2")
    if "Traceback" in out + err:
        problems.append("printed a traceback")
    lines = [line.strip() for line in err.splitlines()[1:] if line.strip()]
    if not err.startswith("error: ") or not lines:
        problems.append(f"no error lines: {err!r}")
    parsed = []
    for line in lines:
        match = LINE.match(line)
        if match is None or match["fix"].startswith("(got"):
            problems.append(f"line lacks the file:line: key: message; fix shape: {line}")
        else:
            parsed.append(match)
    wanted = _line_of(root / case.file, needle)
    hits = [m for m in parsed if m["key"] == case.key and case.says in m["message"] + "; " + m["fix"]]
    if not hits:
        problems.append(f"no line names key {case.key!r} saying {case.says!r}: {lines}")
    for hit in hits:
        if Path(hit["file"]) != root / case.file:
            problems.append(f"names file {hit['file']}, not {root / case.file}")
        if wanted is not None and hit["line"] != str(wanted):
            problems.append(f"points at line {hit['line']}, not {wanted}: {hit.group(0)}")
        if case.got is not None and f"(got {case.got})" not in hit.group(0):
            problems.append(f"does not show the value (got {case.got}): {hit.group(0)}")
        if case.hidden is not None and case.got is None and "(value hidden: " not in hit.group(0):
            problems.append(f"does not say the value is hidden: {hit.group(0)}")
    if case.hidden is not None and case.hidden in out + err:
        problems.append(f"echoes the secret {case.hidden!r}")
    return problems


def test_malformed_inputs_give_one_clear_line_each(tmp_path, capsys):
    tally = {"tried": 0, "clear error": 0, "traceback": 0, "wrongly accepted": 0, "unclear error": 0}
    failures = []
    cases = _cases()
    for number, case in enumerate(cases):
        root = tmp_path / f"case{number}"
        root.mkdir()
        needle = _break(root, case)
        tally["tried"] += 1
        try:
            rc = main(["--root", str(root), "validate"])
        except BaseException as exc:  # noqa: BLE001 - a crash is what this test counts
            tally["traceback"] += 1
            capsys.readouterr()
            failures.append(f"{case.name}: raised {exc.__class__.__name__}: {exc}")
            continue
        captured = capsys.readouterr()
        problems = _problems(case, root, needle, rc, captured.out, captured.err)
        if rc == 0:
            tally["wrongly accepted"] += 1
        elif "Traceback" in captured.out + captured.err:
            tally["traceback"] += 1
        elif problems:
            tally["unclear error"] += 1
        else:
            tally["clear error"] += 1
        failures += [f"{case.name}: {p}" for p in problems]
    summary = ", ".join(f"{k} {v}" for k, v in tally.items())
    print(f"malformed inputs: {summary}")
    assert len(cases) >= 40
    assert not failures, summary + "\n" + "\n".join(failures)
    assert tally["clear error"] == tally["tried"]


@pytest.mark.parametrize("command", [["matrix"], ["matrix", "--format", "github"], ["doctor"],
                                     ["build", "--variant", "cpu"], ["build-mobile"],
                                     ["toolchain", "install", "cuda11"]])
def test_every_command_refuses_bad_input_the_same_way(spec_copy, capsys, command):
    (spec_copy.root / R).write_bytes((spec_copy.root / R).read_bytes().replace(b"# The ember", b"# The \xff"))
    assert main(["--root", str(spec_copy.root), *command]) == 2
    err = capsys.readouterr().err
    assert f"{spec_copy.root / R}:1: (file): is not UTF-8 text (byte 0xff at offset 6); save the file as UTF-8" in err
    assert "Traceback" not in err


def test_requires_python_that_contradicts_the_project_is_refused(spec_copy, capsys):
    """release.yaml may state requires-python for a setup.py-only project, but not contradict the
    one the project's pyproject.toml declares."""
    (spec_copy.root / "library" / "emberaudio" / "pyproject.toml").write_text(
        '[project]\nname = "emberaudio"\nversion = "1.7.0"\nrequires-python = ">=3.10"\n')
    spec_copy.edit(R, "    import_name: emberaudio\n", "    import_name: emberaudio\n    requires_python: \">=3.9\"\n")
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    err = capsys.readouterr().err
    line = _line_of(spec_copy.root / R, "requires_python")
    assert (f"{spec_copy.root / R}:{line}: components.emberaudio.requires_python: disagrees with the project's "
            f"pyproject.toml [project] requires-python ('>=3.10'); remove it (the project's own declaration is "
            f"read) or make the two agree (got '>=3.9')") in err, err


@pytest.mark.parametrize(("project", "release"), [(">=3.11", ">= 3.11"), (">=3.9,<3.13", "<3.13, >=3.9"),
                                                  (">=3.11", ">=3.11.0")])
def test_requires_python_that_says_the_same_in_other_words_agrees(spec_copy, capsys, project, release):
    """The two are compared as specifier sets: spaces, order and trailing zeros change nothing."""
    (spec_copy.root / "library" / "emberaudio" / "pyproject.toml").write_text(
        f'[project]\nname = "emberaudio"\nversion = "1.7.0"\nrequires-python = "{project}"\n')
    spec_copy.edit(R, "    import_name: emberaudio\n",
                   f"    import_name: emberaudio\n    requires_python: \"{release}\"\n")
    assert main(["--root", str(spec_copy.root), "validate"]) == 0, capsys.readouterr().err


def test_merge_keys_are_read_as_yaml_defines_them(spec_copy):
    # `<<: *anchor` is ordinary YAML: the merged keys apply, a key set beside it wins, and an
    # error in a merged key points at the line where it is written (the anchor's).
    spec_copy.edit(R, "  cuda12:\n", "  cuda12: &cuda12\n")
    spec_copy.edit(R, "platforms:\n", "  cuda12b:\n    <<: *cuda12\n    host_gcc_max: 12\n"
                   "  cuda12c:\n    <<: [*cuda12]\n\nplatforms:\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec_copy.root)
    text = str(info.value)
    anchor_tag = (spec_copy.root / R).read_text().splitlines().index("  cuda12: &cuda12") + 2
    assert f"release.yaml:{anchor_tag}: variants.cuda12b.tag: tag is already used by variant 'cuda12'" in text
    assert f"release.yaml:{anchor_tag}: variants.cuda12c.tag: tag is already used by variant 'cuda12b'" in text
    assert text.count("tag is already used") == 2  # nothing else is wrong with the merged variants


def test_a_variant_built_from_a_merge_key_validates(spec_copy):
    spec_copy.edit(R, "  cuda12:\n    tag: cu124\n", "  cuda12:\n    <<: &tag124 {tag: cu124}\n")
    variant = load_spec(spec_copy.root).release.variants["cuda12"]
    assert (variant.tag, variant.cuda, variant.host_gcc_max) == ("cu124", "12.4", 13)


def test_schema_out_that_cannot_be_written(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["schema", "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert f"error: --out {blocker}: cannot write release.schema.json there (File exists); pass a folder" in err
