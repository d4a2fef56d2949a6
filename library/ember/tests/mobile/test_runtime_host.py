"""ember-lite built for the host runs exported models like ember.mobile's reference."""

import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ember import mobile

pytestmark = pytest.mark.feature("mobile.runtime")

RTOL = 1e-5


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_demo_matches_python_reference(host_build, exported_models, name):
    model = exported_models[name]
    proc = host_build.run(["ember-lite-demo", model.path, model.input_path, model.expected_path, RTOL])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("MATCH")


def test_demo_reports_a_mismatch(host_build, exported_models, tmp_path):
    model = exported_models["mlp"]
    wrong = tmp_path / "wrong.bin"
    (model.expected * 1.01).astype("<f4").tofile(wrong)
    proc = host_build.run(["ember-lite-demo", model.path, model.input_path, wrong, RTOL])
    assert proc.returncode == 1
    assert "MISMATCH" in proc.stdout


def test_demo_rejects_a_damaged_model(host_build, exported_models, tmp_path):
    damaged = tmp_path / "damaged.elm"
    damaged.write_bytes(exported_models["cnn"].path.read_bytes()[:-1])
    model = exported_models["cnn"]
    proc = host_build.run(["ember-lite-demo", damaged, model.input_path, model.expected_path])
    assert proc.returncode == 3
    assert "EL_ERR_TRUNCATED" in proc.stderr


def test_golden_models_pass_ctest(host_build):


    proc = subprocess.run(["ctest", "--output-on-failure"], cwd=host_build.build_dir,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "100% tests passed" in proc.stdout


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_c_api_matches_reference(lite_runtime, exported_models, name):
    exported = exported_models[name]
    model = lite_runtime.load(exported.path)
    assert model.input_shape == exported.x.shape
    assert model.output_shape == exported.expected.shape
    np.testing.assert_allclose(model.run(exported.x), exported.expected, rtol=RTOL, atol=RTOL)
    np.testing.assert_allclose(model.run(exported.x), mobile.run_reference(exported.path, exported.x),
                               rtol=RTOL, atol=RTOL)
    # The buffer entry point gives the same model.
    again = lite_runtime.load(exported.path.read_bytes())
    np.testing.assert_array_equal(again.run(exported.x), model.run(exported.x))


def test_output_does_not_depend_on_thread_count(lite_runtime, exported_models):
    exported = exported_models["cnn"]
    model = lite_runtime.load(exported.path)
    lite_runtime.set_num_threads(1)
    single = model.run(exported.x)
    lite_runtime.set_num_threads(2)
    np.testing.assert_allclose(model.run(exported.x), single, rtol=RTOL, atol=1e-7)


def test_run_checks_buffer_lengths(lite_runtime, exported_models):
    model = lite_runtime.load(exported_models["mlp"].path)
    with pytest.raises(mobile.LiteError) as info:
        model.run(np.zeros(7, dtype=np.float32))
    assert info.value.status == "EL_ERR_INVALID_ARGUMENT"
    assert "7 elements" in str(info.value)


@st.composite
def random_models(draw):
    """A random chain: optional conv block, then linear layers, random activations."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    batch = draw(st.integers(1, 3))
    ops = []
    if draw(st.booleans()):
        c_in, size = draw(st.integers(1, 3)), draw(st.integers(4, 9))
        c_out, k = draw(st.integers(1, 4)), draw(st.integers(1, 3))
        stride, padding = draw(st.integers(1, 3)), draw(st.integers(0, 2))
        shape = (batch, c_in, size, size + 1)
        bias = rng.standard_normal(c_out).astype(np.float32) if draw(st.booleans()) else None
        ops.append(mobile.Conv2d(rng.standard_normal((c_out, c_in, k, k)).astype(np.float32) * 0.5,
                                 bias, stride=stride, padding=padding))
        ops.append(mobile.ReLU())
        ops.append(mobile.Flatten(1))
        out_h = (size + 2 * padding - k) // stride + 1
        out_w = (size + 1 + 2 * padding - k) // stride + 1
        features = c_out * out_h * out_w
    else:
        features = draw(st.integers(1, 40))
        shape = (batch, features)
    for _ in range(draw(st.integers(1, 3))):
        width = draw(st.integers(1, 33))
        weight = (rng.standard_normal((width, features)) / np.sqrt(features)).astype(np.float32)
        bias = rng.standard_normal(width).astype(np.float32) if draw(st.booleans()) else None
        ops.append(mobile.Linear(weight, bias))
        # Exp only after Softmax: exp of unbounded activations overflows to inf/nan, where
        # comparing two implementations says nothing.
        ops.extend(draw(st.sampled_from([
            [mobile.ReLU()], [mobile.Softmax()], [mobile.Softmax(), mobile.Exp()],
            [mobile.Add(rng.standard_normal(width).astype(np.float32))],
            [mobile.Mul(rng.standard_normal(width).astype(np.float32))]])))
        features = width
    x = rng.standard_normal(shape).astype(np.float32)
    return mobile.MobileModel(shape, ops), x


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(random_models())
def test_random_models_match_reference(lite_runtime, tmp_path_factory, model_and_input):
    model, x = model_and_input
    path = mobile.export(model, tmp_path_factory.mktemp("random") / "m.elm")
    got = lite_runtime.load(path).run(x)
    # Against ember's own Python ops (same kernels) and against independent float64 numpy.
    np.testing.assert_allclose(got, mobile.run_reference(path, x), rtol=RTOL, atol=RTOL)
    np.testing.assert_allclose(got, mobile.run_reference(path, x, backend="numpy"), rtol=RTOL, atol=RTOL)
