"""The provider against recorded machines: what it reports, through the path NVML's answers take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember_variant_provider.archs import runnable_archs
from ember_variant_provider.machine import MACHINE_ENV, machine_from_description, nvml_description
from ember_variant_provider.plugin import EmberVariantPlugin

MACHINES = Path(__file__).parent / "machines"


def supported(machine: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    monkeypatch.setenv(MACHINE_ENV, str(MACHINES / f"{machine}.json"))
    return {c.name: c.values for c in EmberVariantPlugin.get_supported_configs()}


def test_an_h100_with_a_cuda_12_driver(monkeypatch):
    got = supported("h100-cuda12", monkeypatch)
    assert got["platform"] == ["cuda", "cpu"]
    assert got["arch"][:2] == ["sm_90", "compute_90"]  # its own SASS first, then PTX newest first
    assert "sm_80" not in got["arch"] and "compute_100" not in got["arch"]
    assert got["cuda_runtime"][0] == "12.8" and "13.0" not in got["cuda_runtime"] and "11.8" in got["cuda_runtime"]


def test_a_p100_with_a_cuda_11_driver(monkeypatch):
    got = supported("p100-cuda11", monkeypatch)
    assert got["arch"][:2] == ["sm_60", "compute_60"]
    assert "sm_61" not in got["arch"] and "sm_70" not in got["arch"]
    assert got["cuda_runtime"][0] == "11.8" and "12.0" not in got["cuda_runtime"]


def test_a_k40_with_an_old_driver_runs_only_sm_3x_up_to_35(monkeypatch):
    got = supported("k40-old-driver", monkeypatch)
    assert [a for a in got["arch"] if a.startswith("sm_")] == ["sm_35", "sm_34", "sm_33", "sm_32", "sm_31", "sm_30"]
    assert "sm_37" not in got["arch"] and "compute_37" not in got["arch"]
    assert got["cuda_runtime"][0] == "10.2"


def test_each_gpu_model_reports_what_it_runs_in_a_feature_of_its_own(monkeypatch):
    # A build fits when every GPU runs some code it carries: one value per feature must match, so
    # each model (oldest first) gets one, the models repeated over the four.
    got = supported("a100-a10-cuda12", monkeypatch)
    assert [got[name][0] for name in ("arch", "arch_2", "arch_3", "arch_4")] == ["sm_80", "sm_86", "sm_80", "sm_86"]
    assert "sm_86" not in got["arch"] and "sm_86" in got["arch_2"]
    mixed = supported("rtx3090-gtx1080-cuda12", monkeypatch)
    assert mixed["platform"] == ["cuda", "cpu"]
    assert mixed["arch"][:2] == ["sm_61", "sm_60"] and mixed["arch_2"][:2] == ["sm_86", "sm_85"]
    one = supported("h100-cuda12", monkeypatch)
    assert one["arch"] == one["arch_2"] == one["arch_3"] == one["arch_4"]


def test_more_gpu_models_than_features_report_the_cpu_build(monkeypatch, tmp_path):
    devices = [{"name": f"GPU {m}.0", "cuda_compute_capability": [m, 0]} for m in (5, 6, 7, 8, 9)]
    machine = tmp_path / "five.json"
    machine.write_text(json.dumps({"nvml": {"cuda_driver_version": 12040, "devices": devices}}))
    monkeypatch.setenv(MACHINE_ENV, str(machine))
    assert {c.name: c.values for c in EmberVariantPlugin.get_supported_configs()} == {"platform": ["cpu"]}


def test_no_driver_reports_cpu_only(monkeypatch):
    assert supported("no-driver", monkeypatch) == {"platform": ["cpu"]}


def test_nvml_here_feeds_the_same_description(monkeypatch):
    # Whatever this machine has, the live answer is a description the recorded path reads.
    monkeypatch.delenv(MACHINE_ENV, raising=False)
    live = nvml_description()
    machine = machine_from_description(json.loads(json.dumps(live)))
    configs = {c.name: c.values for c in EmberVariantPlugin.get_supported_configs()}
    assert ("cuda" in configs["platform"]) == machine.has_cuda


@pytest.mark.parametrize("cc, runs, never", [
    ((8, 6), ["sm_86", "sm_80", "compute_86", "compute_52"], ["sm_87", "sm_90", "sm_75", "compute_87"]),
    ((9, 0), ["sm_90", "compute_90", "compute_75"], ["sm_80", "sm_86", "compute_100"]),
    ((12, 0), ["sm_120", "compute_120", "compute_100"], ["sm_100", "sm_90", "compute_121"]),
])
def test_sass_runs_on_its_major_and_ptx_on_newer_gpus(cc, runs, never):
    archs = runnable_archs(cc)
    assert all(a in archs for a in runs) and not any(a in archs for a in never)
