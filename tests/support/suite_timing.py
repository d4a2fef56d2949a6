"""What each test module cost, printed at the end of the run: wall time (setup + call +
teardown, from pytest's reports) and CPU time (the test process plus the subprocesses it waited
for: builds run in subprocesses), per module and per xdist worker.

Each worker measures its own CPU per test and sends it on the test's teardown report (in
`user_properties`, which pytest-xdist carries to the controller); the controller, or the one
process without xdist, adds the reports up. conftest.py registers the plugin.
"""

from __future__ import annotations

import resource
import time
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass

import pytest

CPU_PROPERTY = "cpu_seconds"  # the teardown report's user property: CPU of the whole test


def _cpu_now() -> float:
    """This process's CPU time plus that of its children which ended and were waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@dataclass
class Cost:
    tests: int = 0
    wall: float = 0.0
    cpu: float = 0.0


class SuiteTiming:
    """Measures on whichever process runs tests; adds up and prints on the one that reports."""

    def __init__(self, config: pytest.Config) -> None:
        self._reports_here = not hasattr(config, "workerinput")  # an xdist worker's reports go to the controller
        self._started = 0.0
        self._session_started = time.monotonic()
        self.modules: dict[str, Cost] = defaultdict(Cost)
        self.workers: dict[str, Cost] = defaultdict(Cost)
        self.module_workers: dict[str, set[str]] = defaultdict(set)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        self._started = _cpu_now()
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "teardown":  # the test's last phase: its fixtures are torn down
            report.user_properties.append((CPU_PROPERTY, round(_cpu_now() - self._started, 3)))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self._reports_here:
            return
        module = report.nodeid.split("::", 1)[0]
        worker = getattr(getattr(report, "node", None), "gateway", None)
        worker_id = worker.id if worker is not None else "main"
        cpu = dict(report.user_properties).get(CPU_PROPERTY, 0.0)
        for cost in (self.modules[module], self.workers[worker_id]):
            cost.wall += report.duration
            cost.cpu += float(cpu)  # type: ignore[arg-type]
            if report.when == "setup":
                cost.tests += 1
        self.module_workers[module].add(worker_id)

    @pytest.hookimpl(trylast=True)  # after --durations, the last table of the run
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.modules:
            return
        write = terminalreporter.write_line
        terminalreporter.section("time per test module")
        write("wall: setup + call + teardown of each test (a module's module-scoped fixtures count in its "
              "first test's setup,")
        write("session-scoped ones in the first test that asks for them); CPU: the test processes and the "
              "subprocesses they waited for")
        write("(not a Docker engine's builds); sorted by wall time")
        width = max(len("total"), *(len(m) for m in self.modules))
        write(f"{'module':<{width}}  {'tests':>5}  {'wall s':>8}  {'CPU s':>8}  worker")
        for module, cost in sorted(self.modules.items(), key=lambda kv: -kv[1].wall):
            where = ",".join(sorted(self.module_workers[module]))
            write(f"{module:<{width}}  {cost.tests:>5}  {cost.wall:>8.1f}  {cost.cpu:>8.1f}  {where}")
        total = Cost(sum(c.tests for c in self.modules.values()), sum(c.wall for c in self.modules.values()),
                     sum(c.cpu for c in self.modules.values()))
        write(f"{'total':<{width}}  {total.tests:>5}  {total.wall:>8.1f}  {total.cpu:>8.1f}")
        if len(self.workers) > 1 or "main" not in self.workers:
            took = time.monotonic() - self._session_started
            write(f"busy time per worker (the run took {took:.1f} s of wall time):")
            for worker_id, cost in sorted(self.workers.items()):
                write(f"{worker_id:<{width}}  {cost.tests:>5}  {cost.wall:>8.1f}  {cost.cpu:>8.1f}")
