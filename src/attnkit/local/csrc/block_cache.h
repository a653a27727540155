// attnkit's block cache for the banded flash kernel's large outputs (included by
// band_flash.cpp, after torch/extension.h): ``cached_empty`` makes a tensor whose memory comes
// back here when PyTorch frees it, for the next call of the same size to take.
#pragma once

#include <torch/extension.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

// A cache of the memory behind the strided heads' large outputs (the context, P, the three
// gradients): a tensor made by ``cached_empty`` gives its block back here when PyTorch frees
// it, and the next call of the same size takes it, already faulted in. A fresh tensor of tens
// of MiB is otherwise new pages every step, each zeroed by the kernel on first touch: about
// 12 of the strided heads' 82 ms backward pass on two threads at n = 16,384 (docs/sparse.md,
// run 7). Blocks are 2 MiB aligned and advised onto 2 MiB pages; a freed block over the limit
// (``cache_limit``, 1 GiB by default) goes back to the system at once. Never destroyed: a
// tensor may be freed while the process exits.
class BlockCache {
 public:
  static BlockCache& get() {
    static BlockCache* cache = new BlockCache;
    return *cache;
  }
  // a block of at least ``bytes`` (a cached one up to twice the size a new one would have,
  // else a new one: a whole number of 2 MiB)
  std::pair<void*, size_t> take(size_t bytes) {
    const size_t size = (std::max<size_t>(bytes, 1) + ALIGN - 1) / ALIGN * ALIGN;
    {
      std::lock_guard<std::mutex> hold(lock_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= 2 * size) {
        const auto block = *it;
        free_.erase(it);
        held_ -= block.first;
        return {block.second, block.first};
      }
    }
    void* p = nullptr;
    TORCH_CHECK(posix_memalign(&p, ALIGN, size) == 0, "cached_empty: out of memory (",
                size, " bytes)");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, size, MADV_HUGEPAGE);  // advice only
#endif
    return {p, size};
  }
  // a freed tensor's block (called by its storage's deleter, which must not throw: a block
  // the map cannot take, for want of memory, goes back to the system)
  void give(void* p, size_t size) noexcept {
    try {
      std::lock_guard<std::mutex> hold(lock_);
      if (held_ + size <= limit_) {
        free_.emplace(size, p);
        held_ += size;
        return;
      }
    } catch (...) {
    }
    std::free(p);
  }
  // every cached block back to the system: -> the bytes given back
  size_t release() {
    std::multimap<size_t, void*> blocks;
    size_t bytes;
    {
      std::lock_guard<std::mutex> hold(lock_);
      blocks.swap(free_);
      bytes = held_;
      held_ = 0;
    }
    for (const auto& block : blocks) std::free(block.second);
    return bytes;
  }
  // the most bytes kept cached (when more are cached now, every cached block is freed): -> the
  // previous limit
  size_t set_limit(size_t bytes) {
    size_t before;
    {
      std::lock_guard<std::mutex> hold(lock_);
      before = limit_;
      limit_ = bytes;
    }
    if (held() > bytes) release();
    return before;
  }
  size_t held() {
    std::lock_guard<std::mutex> hold(lock_);
    return held_;
  }

 private:
  static constexpr size_t ALIGN = size_t(1) << 21;
  std::mutex lock_;
  std::multimap<size_t, void*> free_;  // size -> block
  size_t held_ = 0, limit_ = size_t(1) << 30;
};

// An uninitialised contiguous tensor of ``like``'s dtype on the CPU, its memory from the cache
// above (returned to it when the tensor is freed) from 1 MiB up; a smaller one is a plain
// ``torch::empty`` (glibc's heap serves it without fresh pages, and a 2 MiB block would be
// mostly waste)
torch::Tensor cached_empty(std::vector<int64_t> sizes, const torch::Tensor& like) {
  int64_t numel = 1;
  for (const int64_t s : sizes) {
    TORCH_CHECK(s >= 0, "cached_empty: sizes must be >= 0; got ", sizes);
    numel *= s;
  }
  const auto options = like.options().device(torch::kCPU);
  if (numel * like.element_size() < (int64_t(1) << 20)) return torch::empty(sizes, options);
  const auto [p, size] = BlockCache::get().take(numel * like.element_size());
  const size_t kept = size;
  return torch::from_blob(
      p, sizes, [kept](void* block) { BlockCache::get().give(block, kept); }, options);
}

int64_t cache_release() { return (int64_t)BlockCache::get().release(); }
int64_t cache_held() { return (int64_t)BlockCache::get().held(); }
int64_t cache_limit(int64_t bytes) {
  TORCH_CHECK(bytes >= 0, "cache_limit: bytes >= 0 are needed; got ", bytes);
  return (int64_t)BlockCache::get().set_limit((size_t)bytes);
}
