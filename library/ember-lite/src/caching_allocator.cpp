#include "caching_allocator.h"

#include <cstdlib>
#include <limits>

namespace ember_lite {

namespace {

constexpr int kNumBuckets = static_cast<int>(sizeof(size_t) * 8);
constexpr uint32_t kBlockMagic = 0x454C4142u;  // "ELAB"

// Each block carries its size in a header in front of the user pointer. A side table
// (pointer -> size) would itself call malloc on every allocation, which is exactly what
// the cache is there to avoid. 16 bytes keep the user pointer as aligned as malloc's.
struct alignas(16) BlockHeader {
  uint64_t bytes;     // usable bytes (the bucket size, or the exact request when uncached)
  uint32_t magic;
  uint32_t bucketed;  // 1: may go back to a free list
};
static_assert(sizeof(BlockHeader) == 16, "header must keep 16-byte alignment");

BlockHeader* header_of(void* ptr) { return static_cast<BlockHeader*>(ptr) - 1; }
void* user_of(BlockHeader* header) { return header + 1; }

}  // namespace

CachingAllocator::CachingAllocator(bool enabled, uint64_t max_cached_bytes)
    : enabled_(enabled), max_cached_bytes_(max_cached_bytes), free_lists_(kNumBuckets) {
  // Reserve the free lists up front so that pushing a block back never allocates.
  for (auto& list : free_lists_) list.reserve(16);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_locked();
}

size_t CachingAllocator::bucket_bytes(size_t nbytes) {
  if (nbytes <= kMinBlockBytes) return kMinBlockBytes;
  // The largest power of two that still leaves room for the header.
  const size_t largest = (std::numeric_limits<size_t>::max() >> 2) + 1;
  if (nbytes > largest) return 0;
  size_t bucket = kMinBlockBytes;
  while (bucket < nbytes) bucket <<= 1;
  return bucket;
}

int CachingAllocator::bucket_index(size_t bucket_bytes) {
  int index = 0;
  while ((static_cast<size_t>(1) << index) < bucket_bytes) ++index;
  return index;
}

void* CachingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.alloc_requests;
  if (!enabled_) {
    if (nbytes > std::numeric_limits<size_t>::max() - sizeof(BlockHeader)) return nullptr;
    auto* header = static_cast<BlockHeader*>(std::malloc(sizeof(BlockHeader) + nbytes));
    ++stats_.system_mallocs;
    if (header == nullptr) return nullptr;
    *header = BlockHeader{nbytes, kBlockMagic, 0};
    stats_.live_bytes += nbytes;
    return user_of(header);
  }
  const size_t bytes = bucket_bytes(nbytes);
  if (bytes == 0) return nullptr;
  std::vector<void*>& list = free_lists_[bucket_index(bytes)];
  BlockHeader* header = nullptr;
  if (!list.empty()) {
    header = static_cast<BlockHeader*>(list.back());
    list.pop_back();
    stats_.cached_bytes -= bytes;
    ++stats_.cache_hits;
  } else {
    ++stats_.cache_misses;
    ++stats_.system_mallocs;
    header = static_cast<BlockHeader*>(std::malloc(sizeof(BlockHeader) + bytes));
    if (header == nullptr) {
      // Out of memory: give the cache back and try once more before failing.
      release_locked();
      ++stats_.system_mallocs;
      header = static_cast<BlockHeader*>(std::malloc(sizeof(BlockHeader) + bytes));
      if (header == nullptr) return nullptr;
    }
    *header = BlockHeader{bytes, kBlockMagic, 1};
  }
  stats_.live_bytes += bytes;
  return user_of(header);
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  BlockHeader* header = header_of(ptr);
  if (header->magic != kBlockMagic) std::abort();  // not ours, or freed twice
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.free_requests;
  const uint64_t bytes = header->bytes;
  stats_.live_bytes -= bytes;
  const bool cacheable = enabled_ && header->bucketed != 0;
  if (cacheable && stats_.cached_bytes + bytes <= max_cached_bytes_) {
    std::vector<void*>& list = free_lists_[bucket_index(bytes)];
    list.push_back(header);
    stats_.cached_bytes += bytes;
    if (stats_.cached_bytes > stats_.peak_cached_bytes) {
      stats_.peak_cached_bytes = stats_.cached_bytes;
    }
    return;
  }
  if (cacheable) ++stats_.evictions;
  header->magic = 0;
  std::free(header);
  ++stats_.system_frees;
}

uint64_t CachingAllocator::release_locked() {
  uint64_t freed = 0;
  for (size_t index = 0; index < free_lists_.size(); ++index) {
    for (void* block : free_lists_[index]) {
      static_cast<BlockHeader*>(block)->magic = 0;
      std::free(block);
      ++stats_.system_frees;
      freed += static_cast<uint64_t>(1) << index;
    }
    free_lists_[index].clear();
  }
  stats_.cached_bytes = 0;
  return freed;
}

uint64_t CachingAllocator::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.releases;
  return release_locked();
}

void CachingAllocator::evict_to_bound_locked() {
  // Largest blocks first: fewest frees to get under the bound.
  for (int index = kNumBuckets - 1; index >= 0 && stats_.cached_bytes > max_cached_bytes_;
       --index) {
    std::vector<void*>& list = free_lists_[index];
    while (!list.empty() && stats_.cached_bytes > max_cached_bytes_) {
      static_cast<BlockHeader*>(list.back())->magic = 0;
      std::free(list.back());
      list.pop_back();
      ++stats_.system_frees;
      ++stats_.evictions;
      stats_.cached_bytes -= static_cast<uint64_t>(1) << index;
    }
  }
}

void CachingAllocator::set_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  enabled_ = enabled;
  // Switching off means "plain malloc/free from now on": nothing stays cached.
  if (!enabled) release_locked();
}

bool CachingAllocator::enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enabled_;
}

void CachingAllocator::set_max_cached_bytes(uint64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_cached_bytes_ = max_bytes;
  evict_to_bound_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats copy = stats_;
  copy.max_cached_bytes = max_cached_bytes_;
  copy.enabled = enabled_;
  return copy;
}

void CachingAllocator::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t cached = stats_.cached_bytes;
  const uint64_t live = stats_.live_bytes;
  stats_ = AllocatorStats{};
  stats_.cached_bytes = cached;
  stats_.peak_cached_bytes = cached;
  stats_.live_bytes = live;
}

CachingAllocator& global_allocator() {
  // Never destroyed: models may be freed from static destructors after this one ran.
  static CachingAllocator* allocator = new CachingAllocator();
  return *allocator;
}

}  // namespace ember_lite
