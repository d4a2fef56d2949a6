"""ember-lite's stated limits: no buffer over EL_MAX_BUFFER_BYTES (FORMAT.md "Size limit"),
thread counts in 1..4096, and a clear error, never a crash, past either."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from ember import mobile

pytestmark = pytest.mark.feature("mobile.runtime")

LIMIT = 1 << 30  # EL_MAX_BUFFER_BYTES
NAMES_THE_LIMIT = 'over the EL_MAX_BUFFER_BYTES limit of 1073741824 (1 GiB, FORMAT.md "Size limit")'


def refusal(runtime, model) -> mobile.LiteError:
    with pytest.raises(mobile.LiteError) as info:
        runtime.load(model)
    return info.value


@pytest.mark.parametrize("name,needed", [("conv_4mb", 4 * 1048576 * 1026 * 1026), ("conv_4kb", 4 * 1024 * 2018 * 2018)])
def test_conv_whose_im2col_buffer_is_over_the_limit_is_refused(lite_runtime, over_limit_models, name, needed):
    error = refusal(lite_runtime, over_limit_models[name])
    assert error.status == "EL_ERR_TOO_LARGE"
    assert str(error).startswith("EL_ERR_TOO_LARGE: op 0: conv2d's im2col buffer ")
    assert str(error).endswith(f"needs {needed} bytes, {NAMES_THE_LIMIT}")


def test_demo_refuses_the_4mb_model_on_the_host(host_build, over_limit_models):
    model = over_limit_models["conv_4mb"]
    proc = host_build.run(["ember-lite-demo", model, model, model])
    assert proc.returncode == 3 and NAMES_THE_LIMIT in proc.stderr, proc.stderr


def test_the_limit_is_exactly_one_gib(lite_runtime):
    # An input of exactly 1 GiB of float32 loads (it is not run); one element more is refused.
    at_limit = lite_runtime.load(mobile.encode(mobile.MobileModel((1, LIMIT // 4), [mobile.ReLU()])))
    assert at_limit.input_shape == (1, LIMIT // 4)
    at_limit.close()
    error = refusal(lite_runtime, mobile.encode(mobile.MobileModel((1, LIMIT // 4 + 1), [mobile.ReLU()])))
    assert str(error) == f"EL_ERR_TOO_LARGE: input [1, {LIMIT // 4 + 1}] needs {LIMIT + 4} bytes, {NAMES_THE_LIMIT}"
    # An op output: padding grows a small input past the limit.
    conv = mobile.MobileModel((1, 1, 1, 1), [mobile.Conv2d(np.ones((1024, 1, 1, 1), np.float32), None, padding=512)])
    error = refusal(lite_runtime, mobile.encode(conv))
    assert str(error) == (f"EL_ERR_TOO_LARGE: op 0: output [1, 1024, 1025, 1025] needs {4 * 1024 * 1025 * 1025} "
                          f"bytes, {NAMES_THE_LIMIT}")


def test_the_im2col_limit_is_exact(lite_runtime):
    # A k x k kernel on a 1 x 1 input with padding 1024: im2col holds k^2 x (2050 - k)^2
    # floats. k = 8 needs 1067459584 bytes (loads, not run: it would touch 1 GiB); k = 9 is over.
    def conv(k):
        return mobile.encode(mobile.MobileModel((1, 1, 1, 1), [
            mobile.Conv2d(np.ones((1, 1, k, k), np.float32), None, padding=1024)]))

    model = lite_runtime.load(conv(8))
    assert model.output_shape == (1, 1, 2042, 2042)
    model.close()
    error = refusal(lite_runtime, conv(9))
    assert str(error) == (f"EL_ERR_TOO_LARGE: op 0: conv2d's im2col buffer [81, 2041, 2041] needs "
                          f"{4 * 81 * 2041 * 2041} bytes, {NAMES_THE_LIMIT}")


@pytest.mark.parametrize("n", [0, -1, 4097, 2**31 - 1])
def test_thread_count_out_of_range_is_refused(lite_runtime, n):
    with pytest.raises(mobile.LiteError) as info:
        lite_runtime.set_num_threads(n)
    assert info.value.status == "EL_ERR_INVALID_ARGUMENT" and "outside 1..4096" in str(info.value)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_threads_that_cannot_start_are_an_error_not_a_hang(host_build, exported_models):
    # The child's address space: what it uses plus 512 MiB, no room for 999 thread stacks, so
    # pthread_create really fails (RLIMIT_NPROC does not bind root).
    code = textwrap.dedent(f"""
        import os, resource
        import numpy as np
        from ember import mobile
        used = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + (512 << 20),) * 2)
        lite = mobile.EmberLite({str(host_build.shared_library)!r})
        lite.set_num_threads(2)
        try:
            lite.set_num_threads(1000)
        except mobile.LiteError as e:
            print(e.status, e)
        model = lite.load({str(exported_models["mlp"].path)!r})
        print(model.run(np.zeros(model.input_shape, np.float32)).shape)
    """)
    # One malloc arena: each thread's own would reserve 64 MiB of that address space.
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, MALLOC_ARENA_MAX="1"))
    assert proc.returncode == 0, proc.stderr
    status, rest = proc.stdout.splitlines()[0].split(" ", 1)
    assert status == "EL_ERR_OUT_OF_MEMORY" and "set_num_threads(1000): could not start 1000 threads" in rest
    assert rest.endswith("the thread count stays at 2")
    assert proc.stdout.splitlines()[1] == "(3, 5)"
