// CPU caching allocator, after PyTorch Mobile 1.7's CPUCachingAllocator: freed blocks are
// kept in power-of-two size buckets and handed out again, so a model that allocates the
// same intermediate sizes on every inference stops calling malloc after the first one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ember_lite {

struct AllocatorStats {
  uint64_t alloc_requests = 0;
  uint64_t free_requests = 0;
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t system_mallocs = 0;
  uint64_t system_frees = 0;
  uint64_t evictions = 0;
  uint64_t releases = 0;
  uint64_t cached_bytes = 0;
  uint64_t peak_cached_bytes = 0;
  uint64_t live_bytes = 0;
  uint64_t max_cached_bytes = 0;
  bool enabled = false;
};

class CachingAllocator {
 public:
  // Smallest bucket: keeps tiny tensors from fragmenting the cache into many lists.
  static constexpr size_t kMinBlockBytes = 64;
  static constexpr uint64_t kDefaultMaxCachedBytes = 64ull << 20;

  explicit CachingAllocator(bool enabled = true,
                            uint64_t max_cached_bytes = kDefaultMaxCachedBytes);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns nullptr when nbytes is 0 or the system is out of memory.
  void* allocate(size_t nbytes);
  // Accepts nullptr and any pointer this allocator returned (even if switched off since);
  // any other pointer is undefined behaviour, as with free().
  void free(void* ptr);
  // Frees every cached block; returns the bytes given back to the system.
  uint64_t release();

  void set_enabled(bool enabled);
  bool enabled() const;
  void set_max_cached_bytes(uint64_t max_bytes);
  AllocatorStats stats() const;
  void reset_stats();

  // Bucket size that a request of nbytes is rounded to (power of two, >= kMinBlockBytes).
  static size_t bucket_bytes(size_t nbytes);

 private:
  static int bucket_index(size_t bucket_bytes);
  uint64_t release_locked();
  void evict_to_bound_locked();

  mutable std::mutex mutex_;
  bool enabled_;
  uint64_t max_cached_bytes_;
  // Free lists indexed by log2(bucket size).
  std::vector<std::vector<void*>> free_lists_;
  AllocatorStats stats_;
};

// The process-wide allocator the runtime and the C API use.
CachingAllocator& global_allocator();

}  // namespace ember_lite
