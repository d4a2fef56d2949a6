// Unit tests of the caching allocator (its own instances, not the global one).
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "caching_allocator.h"

namespace {

int failures = 0;
int checks = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    ++checks;                                                          \
    if (!(cond)) {                                                     \
      ++failures;                                                      \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                  \
  } while (0)

using ember_lite::CachingAllocator;

void test_buckets() {
  CHECK(CachingAllocator::bucket_bytes(1) == 64);
  CHECK(CachingAllocator::bucket_bytes(64) == 64);
  CHECK(CachingAllocator::bucket_bytes(65) == 128);
  CHECK(CachingAllocator::bucket_bytes(1000) == 1024);
  CHECK(CachingAllocator::bucket_bytes(1024) == 1024);
  CHECK(CachingAllocator::bucket_bytes(1025) == 2048);
}

void test_hit_after_free() {
  CachingAllocator alloc(true, 1 << 20);
  void* a = alloc.allocate(1000);
  CHECK(a != nullptr);
  std::memset(a, 0xAB, 1024);  // whole bucket is usable
  alloc.free(a);
  auto s = alloc.stats();
  CHECK(s.cache_misses == 1 && s.cache_hits == 0 && s.cached_bytes == 1024 && s.live_bytes == 0);
  void* b = alloc.allocate(900);  // same 1024 bucket: must reuse the block
  CHECK(b == a);
  s = alloc.stats();
  CHECK(s.cache_hits == 1 && s.system_mallocs == 1 && s.cached_bytes == 0 && s.live_bytes == 1024);
  void* c = alloc.allocate(2000);  // other bucket: miss
  CHECK(c != a);
  alloc.free(b);
  alloc.free(c);
  s = alloc.stats();
  CHECK(s.cache_misses == 2 && s.cached_bytes == 1024 + 2048 && s.peak_cached_bytes == 3072);
  CHECK(s.system_frees == 0);
}

void test_bound() {
  CachingAllocator alloc(true, 4096);
  void* a = alloc.allocate(4096);
  void* b = alloc.allocate(4096);
  alloc.free(a);  // fits exactly
  alloc.free(b);  // would exceed the bound: freed to the system
  auto s = alloc.stats();
  CHECK(s.cached_bytes == 4096);
  CHECK(s.evictions == 1 && s.system_frees == 1);
  // Lowering the bound evicts.
  alloc.set_max_cached_bytes(1000);
  s = alloc.stats();
  CHECK(s.cached_bytes == 0 && s.evictions == 2 && s.system_frees == 2 && s.max_cached_bytes == 1000);
  // Never above the bound while churning many sizes.
  for (int round = 0; round < 50; ++round) {
    std::vector<void*> blocks;
    for (size_t n = 1; n < 20000; n = n * 3 + 7) blocks.push_back(alloc.allocate(n));
    for (void* p : blocks) alloc.free(p);
    CHECK(alloc.stats().cached_bytes <= 1000);
  }
}

void test_release() {
  CachingAllocator alloc(true, 1 << 20);
  void* a = alloc.allocate(100);
  void* b = alloc.allocate(5000);
  alloc.free(a);
  alloc.free(b);
  CHECK(alloc.stats().cached_bytes == 128 + 8192);
  CHECK(alloc.release() == 128 + 8192);
  auto s = alloc.stats();
  CHECK(s.cached_bytes == 0 && s.releases == 1 && s.system_frees == 2);
  void* c = alloc.allocate(100);  // cache empty again: miss
  CHECK(alloc.stats().cache_misses == 3);
  alloc.free(c);
}

void test_disabled() {
  CachingAllocator alloc(false, 1 << 20);
  for (int i = 0; i < 10; ++i) {
    void* p = alloc.allocate(256);
    CHECK(p != nullptr);
    alloc.free(p);
  }
  auto s = alloc.stats();
  CHECK(s.system_mallocs == 10 && s.system_frees == 10 && s.cache_hits == 0 && s.cached_bytes == 0);
  CHECK(!s.enabled);
  // Switch on at runtime: caching starts.
  alloc.set_enabled(true);
  for (int i = 0; i < 10; ++i) alloc.free(alloc.allocate(256));
  s = alloc.stats();
  CHECK(s.system_mallocs == 11 && s.cache_hits == 9 && s.cached_bytes == 256);
  // A block allocated while on and freed after switching off goes back to the system,
  // and switching off drops the cache.
  void* held = alloc.allocate(256);
  alloc.set_enabled(false);
  CHECK(alloc.stats().cached_bytes == 0);
  alloc.free(held);
  s = alloc.stats();
  CHECK(s.cached_bytes == 0 && s.live_bytes == 0 && s.system_frees == s.system_mallocs);
}

void test_reset_and_zero() {
  CachingAllocator alloc(true, 1 << 20);
  CHECK(alloc.allocate(0) == nullptr);
  alloc.free(nullptr);
  alloc.free(alloc.allocate(10));
  alloc.reset_stats();
  auto s = alloc.stats();
  CHECK(s.alloc_requests == 0 && s.cache_misses == 0 && s.cached_bytes == 64);
}

void test_threads() {
  CachingAllocator alloc(true, 1 << 16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&alloc, t] {
      for (int i = 0; i < 2000; ++i) {
        const size_t n = 16 + static_cast<size_t>((i * 37 + t * 11) % 3000);
        auto* p = static_cast<unsigned char*>(alloc.allocate(n));
        std::memset(p, t, n);
        alloc.free(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  auto s = alloc.stats();
  CHECK(s.alloc_requests == 8000 && s.free_requests == 8000 && s.live_bytes == 0);
  CHECK(s.cache_hits + s.cache_misses == 8000);
  CHECK(s.cached_bytes <= (1u << 16));
  alloc.release();
  s = alloc.stats();
  CHECK(s.system_mallocs == s.system_frees);  // nothing leaked
}

}  // namespace

int main() {
  test_buckets();
  test_hit_after_free();
  test_bound();
  test_release();
  test_disabled();
  test_reset_and_zero();
  test_threads();
  std::printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
