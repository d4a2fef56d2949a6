"""ember-lite cross-built for arm64 and armv7 gives the same results under qemu.

Skipped with the reason when the cross compiler, qemu-user or the sysroot is missing.
"""

import numpy as np
import pytest

RTOL = 1e-5


@pytest.mark.feature("mobile.runtime")
@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_demo_under_qemu_matches_reference(cross_build, exported_models, name):
    model = exported_models[name]
    proc = cross_build.run(["ember-lite-demo", model.path, model.input_path, model.expected_path, RTOL])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("MATCH")


@pytest.mark.feature("mobile.runtime")
def test_binaries_are_for_the_target(cross_build):
    machine = int.from_bytes(cross_build.shared_library.read_bytes()[18:20], "little")
    expected = {"aarch64": 183, "arm": 40}  # ELF e_machine: EM_AARCH64, EM_ARM
    arch = "aarch64" if "aarch64" in cross_build.build_dir.name else "arm"
    assert machine == expected[arch]


@pytest.mark.feature("mobile.runtime")
def test_loader_fuzz_under_qemu(cross_build, exported_models, over_limit_models):
    # On armv7 size_t is 32 bits: the fuzzer's invariant that no accepted model needs a
    # buffer over EL_MAX_BUFFER_BYTES is checked where a wrapped size would bite.
    seeds = [m.path for m in exported_models.values()] + [over_limit_models["conv_4kb"]]
    proc = cross_build.run(["fuzz_model_load", "--iterations", "1500", *seeds])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for status in ("EL_OK", "EL_ERR_CHECKSUM", "EL_ERR_MALFORMED", "EL_ERR_TOO_LARGE"):
        assert status + "=" in proc.stdout, proc.stdout


@pytest.mark.feature("mobile.runtime")
def test_model_over_the_buffer_limit_is_refused_under_qemu(cross_build, over_limit_models):
    # The 4 MB conv model overflowed the heap on armv7 (SIGSEGV under qemu-arm).
    model = over_limit_models["conv_4mb"]
    proc = cross_build.run(["ember-lite-demo", model, model, model])
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        "error: EL_ERR_TOO_LARGE: op 0: conv2d's im2col buffer [1048576, 1026, 1026] needs 4415243157504 bytes, "
        'over the EL_MAX_BUFFER_BYTES limit of 1073741824 (1 GiB, FORMAT.md "Size limit")')


@pytest.mark.feature("mobile.caching-allocator")
def test_allocator_unit_test_under_qemu(cross_build):
    proc = cross_build.run(["test_caching_allocator"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("0 failed")
