"""The CPU caching allocator: bucketed reuse, hit/miss stats, the bound, release(), and
switching it off at run time, observed through the C API."""

import json
import subprocess

import numpy as np
import pytest

pytestmark = pytest.mark.feature("mobile.caching-allocator")


def test_cpp_unit_test(host_build):
    proc = host_build.run(["test_caching_allocator"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith(" 0 failed")


def test_steady_state_inference_never_calls_malloc(allocator, exported_models):
    exported = exported_models["cnn"]
    model = allocator.load(exported.path)
    first = model.run(exported.x)
    after_first = allocator.allocator_stats()
    assert after_first.cache_misses > 0 and after_first.system_mallocs == after_first.cache_misses
    requests_per_run = after_first.alloc_requests
    for _ in range(5):
        np.testing.assert_array_equal(model.run(exported.x), first)
    stats = allocator.allocator_stats()
    assert stats.system_mallocs == after_first.system_mallocs  # no new malloc
    assert stats.alloc_requests == 6 * requests_per_run
    assert stats.cache_hits == stats.alloc_requests - stats.cache_misses
    assert stats.live_bytes == 0 and stats.cached_bytes > 0


def test_switched_off_it_is_plain_malloc_free(allocator, exported_models):
    exported = exported_models["cnn"]
    model = allocator.load(exported.path)
    cached_output = model.run(exported.x)
    allocator.set_allocator_enabled(False)
    stats = allocator.allocator_stats()
    assert not stats.enabled and stats.cached_bytes == 0  # switching off drops the cache
    allocator.reset_allocator_stats()
    for _ in range(3):
        np.testing.assert_array_equal(model.run(exported.x), cached_output)
    stats = allocator.allocator_stats()
    assert stats.cache_hits == 0 and stats.cache_misses == 0
    assert stats.system_mallocs == stats.alloc_requests == stats.system_frees
    assert stats.cached_bytes == 0
    allocator.set_allocator_enabled(True)
    model.run(exported.x)
    model.run(exported.x)
    assert allocator.allocator_stats().cache_hits > 0


def test_bound_is_never_exceeded(allocator, exported_models):
    exported = exported_models["cnn"]
    model = allocator.load(exported.path)
    model.run(exported.x)
    unbounded = allocator.allocator_stats().cached_bytes
    bound = unbounded // 2
    allocator.set_max_cached_bytes(bound)
    stats = allocator.allocator_stats()
    assert stats.cached_bytes <= bound and stats.evictions > 0 and stats.max_cached_bytes == bound
    for _ in range(4):
        np.testing.assert_allclose(model.run(exported.x), exported.expected, rtol=1e-5, atol=1e-5)
        assert allocator.allocator_stats().cached_bytes <= bound
    stats = allocator.allocator_stats()
    assert stats.cache_hits > 0  # what fits is still reused
    assert stats.system_frees > 0  # what does not is freed, not cached


def test_release_frees_the_cache(allocator, exported_models):
    exported = exported_models["mlp"]
    model = allocator.load(exported.path)
    model.run(exported.x)
    cached = allocator.allocator_stats().cached_bytes
    assert cached > 0
    assert allocator.release_cache() == cached
    stats = allocator.allocator_stats()
    assert stats.cached_bytes == 0 and stats.releases == 1
    misses = stats.cache_misses
    model.run(exported.x)
    assert allocator.allocator_stats().cache_misses > misses  # had to malloc again


def test_power_of_two_buckets(allocator):
    lib = allocator.lib
    a = lib.el_allocator_alloc(1000)
    assert allocator.allocator_stats().live_bytes == 1024
    lib.el_allocator_free(a)
    b = lib.el_allocator_alloc(513)  # also the 1024 bucket: the same block comes back
    assert b == a
    c = lib.el_allocator_alloc(10)  # 64-byte minimum bucket
    stats = allocator.allocator_stats()
    assert stats.live_bytes == 1024 + 64 and stats.cache_hits == 1 and stats.cache_misses == 2
    lib.el_allocator_free(b)
    lib.el_allocator_free(c)
    assert allocator.allocator_stats().cached_bytes == 1024 + 64


def test_bench_counts_fewer_mallocs_with_the_cache(host_build, exported_models):
    bench = host_build.program("ember-lite-bench")
    proc = subprocess.run([str(bench), str(exported_models["cnn"].path), "3", "20"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    caching, plain = result["caching"], result["plain"]
    assert caching["allocator_system_mallocs_per_inference"] == 0
    assert plain["allocator_system_mallocs_per_inference"] == plain["allocator_requests_per_inference"] > 0
    # Every allocator request saved is one process-wide malloc saved.
    saved = plain["mallocs_per_inference"] - caching["mallocs_per_inference"]
    assert saved == pytest.approx(plain["allocator_requests_per_inference"])
