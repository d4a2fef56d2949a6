"""What the tests share, one module per job (tests/README.md says where a test goes).

Test files import these as `from support.<module> import ...`: tests/ is on sys.path because
conftest.py lives there (pytest's default "prepend" import mode).

- docker_daemon: the run's Docker engine (the running one, else one dockerd the run starts and stops).
- ember_images: ember's images, built once per session by shipyard's image pipeline.
- fault_proxy: a fault-injecting TCP proxy on loopback (503s, resets, stalls) in front of a server.
- headless_chromium: Debian's chromium, headless: a page's DOM after its scripts ran, its screenshot.
- input_fuzz: the input fuzzer's strategies and invariant (project/test_input_fuzz.py, `nox -s fuzz`).
- input_world: the release root every command reads, which the bad-input tests and the fuzzer break
  one file at a time (and the commands that read it, and its snapshot).
- minirelease: the fixture release (fixtures/minirelease) as a git checkout, built once per run.
- oidc_standin: a stand-in for GitHub's ID-token service and PyPI's OIDC exchange.
- pipeline_run: a clone of the checkout with a fixture commit, one `shipyard ci run` of it, what it left.
- publish_project: the publish tests' one project builder: a release root pointed at their servers,
  a dist/ and the credentials; `run` is `shipyard publish|promote …` as a user runs it.
- publish_servers: real servers on 127.0.0.1 (devpi, pypiserver, static tree, conda channel, registry).
- registry_auth: a CA, a server certificate and a bearer-token service for the registry tests.
- release_copy: the repository's release.yaml and feature_status.yaml copied into a folder, with the
  empty component folders they name (SpecCopy, the `spec_copy` fixture), or pointed at other servers.
- report_release: a dist/ of a partial run (passed, failed, cached, untested) for the report tests.
- shipyard_process: `run_shipyard`, the one way a test runs shipyard as a child process.
- suite_timing: the table of wall and CPU time per test module at the end of a run.
- synthetic_release: small real artifacts (tiny wheels, .conda packages) and a manifest recording them.
- sysroot_debs: the .debs an assembled sysroot came from, for comparing an SBOM with.
- user_installs: what a user does with a published release (docker pull and run, pip as a user).
- wheel_edit: change one file inside a built wheel and keep the wheel valid.
"""
