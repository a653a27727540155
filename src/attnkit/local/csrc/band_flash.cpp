// Banded flash attention on the CPU: sliding-window scaled-dot attention, forward and
// backward, in O(n·W) time and memory, computing only the keys a block of queries can reach.
//
//   c_t = Σ_{j ∈ band(t)} p_tj v_j,   p_tj = exp(s_tj - ℓ_t),   s_tj = q_t·k_j / √d
//   band(t) = {j : |t - j| <= r, 0 <= j < Tk}   ({j : 0 <= t - j <= r} causal), AND keep[j]
//
// Per block of bq queries [t0, t0 + bq) the keys [lo, hi) that any of them reaches are one
// contiguous range of at most bq + 2r rows: the block's scores are one GEMM (bq × nk, K = D),
// its context one more (bq × Dv, K = nk), both on the inputs in place (no tiles, no copies).
// Backward (FlashAttention, Dao et al. 2022, Alg. 4) recomputes p from the saved ℓ and runs
// five GEMMs per block; dK and dV of the block's key range are accumulated in place (β = 1):
// blocks whose key ranges overlap are never run at the same time (two colours of chunks).
//
// Layout: q (G, Tq, D), k (G, Tk, D), v (G, Tk, Dv), the incoming gradient and out (G, Tq, Dv)
// with unit stride along the last dim and any other strides, or 4-D (G1, G2, T, ·) with
// G = G1 · G2 (every other head of a (B, H, T, D) tensor, or the residue classes mod l of
// those heads, are such views: read and written in place, no copy); ``forward`` and
// ``backward`` allocate contiguous outputs, ``forward_into`` and ``backward_into`` write into
// the caller's. lse (G, Tq) contiguous; keep (Gm, Tk) bool, Gm ∈ {1, G}, or empty. A row with
// no allowed key has ℓ = +inf, a zero context and zero gradients.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define CPU_CAPABILITY AVX512
#define CPU_CAPABILITY_AVX512
#elif defined(__AVX2__) && defined(__FMA__)
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#else
#define CPU_CAPABILITY DEFAULT
#endif

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "block_cache.h"  // cached_empty: the strided heads' outputs

extern "C" {
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*,
            const float*, const int*, const float*, const int*, const float*, float*,
            const int*);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*,
            const double*, const int*, const double*, const int*, const double*, double*,
            const int*);
}

// MKL's per-thread limit, where torch links MKL (a weak symbol: null without it). The C entry
// point: mkl_service.h defines mkl_set_num_threads_local as this name (the lower-case symbol
// is the Fortran one, which takes a pointer).
extern "C" int MKL_Set_Num_Threads_Local(int) __attribute__((weak));
extern "C" int MKL_Get_Max_Threads() __attribute__((weak));

namespace {
// For the life of one worker's share of a parallel region: BLAS on this thread alone. Once
// ``torch.set_num_threads`` has run it turns MKL's dynamic threads off, and each small GEMM
// called inside our parallel region would start as many threads again, nested: forward and
// backward took 20% and 35% longer at n = 16,384 on two threads (docs/sparse.md, run 7).
// Without MKL (or with another BLAS) this does nothing.
struct OwnThreadBlas {
  int before = 0;
  OwnThreadBlas() {
    if (MKL_Set_Num_Threads_Local) before = MKL_Set_Num_Threads_Local(1);
  }
  ~OwnThreadBlas() {
    if (MKL_Set_Num_Threads_Local) MKL_Set_Num_Threads_Local(before);
  }
  OwnThreadBlas(const OwnThreadBlas&) = delete;
  OwnThreadBlas& operator=(const OwnThreadBlas&) = delete;
};

// Row-major C (m × n) = alpha · op(A) · op(B) + beta · C, through the column-major BLAS:
// row-major X is column-major Xᵀ, so C = op(A) op(B) is Cᵀ = op(B)ᵀ op(A)ᵀ.
template <typename T>
void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b,
          int ldb, T beta, T* c, int ldc) {
  const char opa = ta ? 'T' : 'N', opb = tb ? 'T' : 'N';
  if constexpr (std::is_same_v<T, float>) {
    sgemm_(&opb, &opa, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
  } else {
    dgemm_(&opb, &opa, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
  }
}

// x[i] = exp(x[i] - shift) for i in [0, n): vectorised for float (ATen's exp_u20, the
// exponential PyTorch's own CPU flash kernel uses), std::exp for double.
template <typename T>
T exp_shift_sum(T* x, int n, T shift) {
  if constexpr (std::is_same_v<T, float>) {
    using Vec = at::vec::Vectorized<float>;
    const Vec vs(shift);
    Vec acc(0.f);
    int i = 0;
    for (; i + Vec::size() <= n; i += Vec::size()) {
      Vec e = (Vec::loadu(x + i) - vs).exp_u20();
      e.store(x + i);
      acc = acc + e;
    }
    float lanes[Vec::size()];
    acc.store(lanes);
    float sum = 0.f;
    for (int j = 0; j < Vec::size(); ++j) sum += lanes[j];
    for (; i < n; ++i) {
      x[i] = std::exp(x[i] - shift);
      sum += x[i];
    }
    return sum;
  } else {
    T sum = 0;
    for (int i = 0; i < n; ++i) {
      x[i] = std::exp(x[i] - shift);
      sum += x[i];
    }
    return sum;
  }
}

// Σ a[i] b[i] for i in [0, n), vectorised (the compiler leaves a floating-point sum in order,
// one lane at a time; here 4 accumulators of a vector's lanes each)
template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  using Vec = at::vec::Vectorized<T>;
  constexpr int64_t w = Vec::size();
  Vec s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
  int64_t i = 0;
  for (; i + 4 * w <= n; i += 4 * w) {
    s0 = at::vec::fmadd(Vec::loadu(a + i), Vec::loadu(b + i), s0);
    s1 = at::vec::fmadd(Vec::loadu(a + i + w), Vec::loadu(b + i + w), s1);
    s2 = at::vec::fmadd(Vec::loadu(a + i + 2 * w), Vec::loadu(b + i + 2 * w), s2);
    s3 = at::vec::fmadd(Vec::loadu(a + i + 3 * w), Vec::loadu(b + i + 3 * w), s3);
  }
  for (; i + w <= n; i += w) s0 = at::vec::fmadd(Vec::loadu(a + i), Vec::loadu(b + i), s0);
  T lanes[w];
  ((s0 + s1) + (s2 + s3)).store(lanes);
  T sum = 0;
  for (int64_t j = 0; j < w; ++j) sum += lanes[j];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// streaming stores pay where what is written is larger than a core's caches (it would be evicted
// before it is read again anyway); below this, P and dK, dV are written as usual
constexpr int64_t STREAM_BYTES = int64_t(4) << 20;

// streaming stores before it ordered before any store after it
inline void stream_fence() {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

// to[i] = from[i] * by for i in [0, n); with ``stream``, for float on AVX-512 or AVX, with
// streaming stores where ``to`` is aligned to the vector (P is written once and read only by
// the backward pass, much later; the classes' dK, dV once: no need to read their lines into
// the cache first), and ``stream_fence`` before anything reads them on another thread
template <typename T>
void scale_into(const T* from, T by, T* to, int64_t n, bool stream) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (stream) {
#if defined(__AVX512F__)
      const __m512 s = _mm512_set1_ps(by);
      for (; i < n && (reinterpret_cast<uintptr_t>(to + i) & 63) != 0; ++i) to[i] = from[i] * by;
      for (; i + 16 <= n; i += 16)
        _mm512_stream_ps(to + i, _mm512_mul_ps(_mm512_loadu_ps(from + i), s));
#elif defined(__AVX__)
      const __m256 s = _mm256_set1_ps(by);
      for (; i < n && (reinterpret_cast<uintptr_t>(to + i) & 31) != 0; ++i) to[i] = from[i] * by;
      for (; i + 8 <= n; i += 8)
        _mm256_stream_ps(to + i, _mm256_mul_ps(_mm256_loadu_ps(from + i), s));
#endif
    }
  }
  for (; i < n; ++i) to[i] = from[i] * by;
}

// max(x[0..n)) and init, vectorised for float
template <typename T>
T row_max(const T* x, int n, T init) {
  T m = init;
  int i = 0;
  if constexpr (std::is_same_v<T, float>) {
    using Vec = at::vec::Vectorized<float>;
    Vec acc(init);
    for (; i + Vec::size() <= n; i += Vec::size()) acc = at::vec::maximum(acc, Vec::loadu(x + i));
    float lanes[Vec::size()];
    acc.store(lanes);
    for (int j = 0; j < Vec::size(); ++j) m = std::max(m, lanes[j]);
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

struct Band {
  int64_t tq, tk, r, block;
  bool causal;
  // keys [lo, hi) block i's queries reach
  int64_t lo(int64_t i) const { return std::max<int64_t>(0, i * block - r); }
  int64_t hi(int64_t i) const {
    int64_t last = std::min(tq, (i + 1) * block) - 1;
    return std::min(tk, (causal ? last : last + r) + 1);
  }
  // keys [jlo, jhi) query t may attend, before the keep mask (may be empty)
  int64_t jlo(int64_t t) const { return std::max<int64_t>(0, t - r); }
  int64_t jhi(int64_t t) const { return std::min(tk, (causal ? t : t + r) + 1); }
  int64_t blocks() const { return (tq + block - 1) / block; }
  // the most keys one block reaches: the scratch row width
  int64_t span() const { return std::min(tk, block + 2 * r); }
  // the backward's chunks of blocks: chunk c's key ranges end before chunk c + 2's begin, so
  // the chunks of one colour (c even, then c odd) never add into the same dK/dV rows
  int64_t chunk_blocks() const { return std::max<int64_t>(1, (2 * r + block) / block + 1); }
  // where block i's saved weights (rows × (hi - lo), row-major) start in a slice's share of
  // the forward's saved weights; the last entry is the share's size
  std::vector<int64_t> offsets() const {
    std::vector<int64_t> off(blocks() + 1, 0);
    for (int64_t i = 0; i < blocks(); ++i) {
      const int64_t rows = std::min(block, tq - i * block);
      off[i + 1] = off[i] + rows * std::max<int64_t>(hi(i) - lo(i), 0);
    }
    return off;
  }
};

// The forward's normalised weights P, kept for the backward pass (``forward_saving``), laid out
// by the backward's blocks (``band``, whose block divides the forward's): slice gi's block i at
// p + gi · per + off[i], rows × nk row-major, 0 off the band and on masked keys. The backward
// then reads P instead of recomputing QKᵀ and its exponentials: four GEMMs a block instead of
// five, for O(G · Tq · (block + 2r)) memory.
template <typename T>
struct Weights {
  T* p;
  Band band;
  std::vector<int64_t> off;
  int64_t per;
  Weights(T* p_, const Band& b) : p(p_), band(b), off(b.offsets()), per(off.back()) {}
  T* at(int64_t gi, int64_t i) const { return p + gi * per + off[i]; }
};

// The backward's schedule: chunks of chunk_blocks() blocks, [first, stop), split in two colours
// (even chunks, then odd ones); within a colour no two chunks reach the same keys.
std::vector<std::vector<std::pair<int64_t, int64_t>>> colours(const Band& band) {
  const int64_t span = band.chunk_blocks(), nb = band.blocks();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> out(2);
  for (int64_t c = 0; c * span < nb; ++c)
    out[c % 2].emplace_back(c * span, std::min(nb, (c + 1) * span));
  return out;
}

// p (rows × nk, row-major, keys [lo, lo + nk)) holds the scores of queries [t0, t0 + rows).
// Forward (saved = nullptr): p_tj = exp(s_tj - max_t) on the band (0 elsewhere),
// ℓ_t = max_t + log Σ_j p_tj into lse, 1 / Σ_j p_tj into inv (0 for a row with no allowed
// key, whose ℓ = +inf).
// Backward: p_tj = exp(s_tj - ℓ_t) with ℓ = saved (0 off the band, 0 for ℓ = +inf).
template <typename T>
void band_softmax(T* p, int rows, int nk, int64_t t0, int64_t lo, const Band& band,
                  const bool* keep, const T* saved, T* lse, T* inv) {
  const bool forward = saved == nullptr;
  const T lowest = std::numeric_limits<T>::lowest();
  for (int a = 0; a < rows; ++a) {
    T* row = p + (int64_t)a * nk;
    const int64_t t = t0 + a;
    const int b0 = (int)std::clamp<int64_t>(band.jlo(t) - lo, 0, nk);
    const int b1 = std::max(b0, (int)std::clamp<int64_t>(band.jhi(t) - lo, 0, nk));
    std::fill(row, row + b0, T(0));
    std::fill(row + b1, row + nk, T(0));
    if (keep)
      for (int c = b0; c < b1; ++c)
        if (!keep[lo + c]) row[c] = lowest;
    T shift;
    if (forward) {
      shift = row_max(row + b0, b1 - b0, lowest);
      if (shift == lowest) {  // no allowed key
        std::fill(row + b0, row + b1, T(0));
        lse[a] = std::numeric_limits<T>::infinity();
        inv[a] = T(0);
        continue;
      }
    } else {
      shift = saved[a];
      if (std::isinf(shift)) {
        std::fill(row + b0, row + b1, T(0));
        continue;
      }
    }
    const T s = exp_shift_sum(row + b0, b1 - b0, shift);
    if (keep)
      for (int c = b0; c < b1; ++c)
        if (!keep[lo + c]) row[c] = T(0);
    if (forward) {
      lse[a] = shift + std::log(s);
      inv[a] = T(1) / s;
    }
  }
}

// One operand (G, T, E) seen as (G1, G2, T, E) with any strides, unit along E: slice
// gi = g1 · G2 + g2, its row t at p + g1 s1 + g2 s2 + t st (st: the BLAS leading dimension).
// Every other head of (B, H, T, E) is (B, H/2, T, E); the Sparse Transformer's residue classes
// of those heads are (B·H/2, l, T/l, E) with st = l·E: both read and written in place.
template <typename T>
struct Mat {
  T* p;
  int64_t g2, s1, s2, st;
  int64_t t_first = 0, g_first = 0;  // a staged copy holds slices g_first.., rows t_first..
  T* at(int64_t gi, int64_t t) const {
    gi -= g_first;
    return p + (gi / g2) * s1 + (gi % g2) * s2 + (t - t_first) * st;
  }
  bool rows_apart(int64_t width) const { return st != width; }
};

// Rows [t_first, t_first + rows) of slices [g_first, g_first + count) of an operand, held
// contiguous (slice by slice): the backward pass stages a chunk of a group of slices whose rows
// lie apart (the residue classes: row r of classes c, c + 1, .. are adjacent, one class's rows
// l·D apart). Read class by class, every row is a cache miss across pages; staged, a group's
// row r is one contiguous read, and the GEMMs run on contiguous rows.
template <typename T>
struct Staged {
  std::vector<T> buf;
  Mat<T> view(int64_t g_first, int64_t count, int64_t t_first, int64_t rows, int64_t width) {
    buf.resize(std::max<int64_t>(count * rows * width, 1));
    Mat<T> m{buf.data(), std::max<int64_t>(count, 1), 0, rows * width, width};
    m.t_first = t_first;
    m.g_first = g_first;
    return m;
  }
};

// to[g, t] = from[g, t] (or += when ``add``) for the slices and rows of a staged group, row by
// row across the group (the order in which the residue classes lie in memory); ``stream``:
// streaming stores (a final output, not read again soon)
template <typename T>
void copy_rows(const Mat<T>& from, const Mat<T>& to, int64_t g_first, int64_t count,
               int64_t t_first, int64_t rows, int64_t width, bool add, bool stream = false) {
  for (int64_t a = 0; a < rows; ++a)
    for (int64_t c = 0; c < count; ++c) {
      const T* src = from.at(g_first + c, t_first + a);
      T* dst = to.at(g_first + c, t_first + a);
      if (add)
        for (int64_t e = 0; e < width; ++e) dst[e] += src[e];
      else if (stream)
        scale_into(src, T(1), dst, width, true);
      else
        std::copy(src, src + width, dst);
    }
  if (stream) stream_fence();
}

// rows [t_first, t_first + rows) of slices [g_first, g_first + count) set to zero
template <typename T>
void zero_rows(const Mat<T>& to, int64_t g_first, int64_t count, int64_t t_first, int64_t rows,
               int64_t width) {
  for (int64_t c = 0; c < count; ++c)
    for (int64_t a = 0; a < rows; ++a) {
      T* dst = to.at(g_first + c, t_first + a);
      std::fill(dst, dst + width, T(0));
    }
}

// slices staged together where the rows lie apart: 8 classes' rows of 64 floats are 2 KiB read
// at once
constexpr int64_t STAGE_GROUP = 8;

template <typename T>
struct Inputs {
  Mat<T> q, k, v;
  const bool* keep;  // (Gm, Tk) or nullptr
  int64_t keep_stride;  // Tk, or 0 when one mask row serves every g
  int64_t g, d, dv;
  const bool* keep_of(int64_t gi) const { return keep ? keep + gi * keep_stride : nullptr; }
};

template <typename T>
void forward_impl(const Inputs<T>& in, const Mat<T>& out, T* lse, const Band& band,
                  const Weights<T>* saved = nullptr) {
  const int64_t nb = band.blocks(), bq = band.block, d = in.d, dv = in.dv;
  const T scale = T(1) / std::sqrt(T(d));
  const bool stream = saved && saved->per * in.g * int64_t(sizeof(T)) >= STREAM_BYTES;
  at::parallel_for(0, in.g * nb, 1, [&](int64_t begin, int64_t end) {
    const OwnThreadBlas alone;
    std::vector<T> p(bq * band.span()), inv(bq);
    for (int64_t w = begin; w < end; ++w) {
      const int64_t gi = w / nb, i = w % nb;
      const int64_t t0 = i * bq, rows = std::min(bq, band.tq - t0);
      const int64_t lo = band.lo(i), nk = std::max<int64_t>(band.hi(i) - lo, 0);
      T* o = out.at(gi, t0);
      T* l = lse + gi * band.tq + t0;
      if (nk == 0) {  // the block reaches no key (queries past Tk + r)
        for (int64_t a = 0; a < rows; ++a) std::fill(o + a * out.st, o + a * out.st + dv, T(0));
        std::fill(l, l + rows, std::numeric_limits<T>::infinity());
        continue;
      }
      const T* qb = in.q.at(gi, t0);
      const T* kb = in.k.at(gi, lo);
      const T* vb = in.v.at(gi, lo);
      gemm<T>(false, true, rows, nk, d, scale, qb, in.q.st, kb, in.k.st, T(0), p.data(), nk);
      band_softmax<T>(p.data(), rows, nk, t0, lo, band, in.keep_of(gi), nullptr, l, inv.data());
      if (saved) {  // P = p / Σp by the backward's blocks; the context is computed as without
        const Band& sb = saved->band;
        for (int64_t j = t0 / sb.block; j * sb.block < t0 + rows; ++j) {
          const int64_t s0 = j * sb.block, srows = std::min(sb.block, band.tq - s0);
          const int64_t slo = sb.lo(j), snk = std::max<int64_t>(sb.hi(j) - slo, 0);
          T* w = saved->at(gi, j);
          for (int64_t a = 0; a < srows; ++a) {
            const T* pa = p.data() + (s0 - t0 + a) * nk + (slo - lo);
            T* wa = w + a * snk;
            const T ia = inv[s0 - t0 + a];
            scale_into(pa, ia, wa, snk, stream);
          }
        }
      }
      gemm<T>(false, false, rows, dv, nk, T(1), p.data(), nk, vb, in.v.st, T(0), o, out.st);
      for (int64_t a = 0; a < rows; ++a)
        for (int64_t c = 0; c < dv; ++c) o[a * out.st + c] *= inv[a];
    }
    if (stream) stream_fence();  // P's streaming stores, ordered before the region ends
  });
}

// blocks [first, stop) of slice gi, one after another: the five GEMMs per block (p, ds: the
// scratch of bq × span scores, delta: bq)
template <typename T>
void backward_blocks(const Inputs<T>& in, const Mat<T>& out, const T* lse, const Mat<T>& dout,
                     const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv_, const Band& band,
                     int64_t gi, int64_t first, int64_t stop, T* p, T* ds, T* delta,
                     const Weights<T>* saved = nullptr) {
  const int64_t bq = band.block, d = in.d, dv = in.dv;
  const T scale = T(1) / std::sqrt(T(d));
  for (int64_t i = first; i < stop; ++i) {
    const int64_t t0 = i * bq, rows = std::min(bq, band.tq - t0);
    const int64_t lo = band.lo(i), nk = std::max<int64_t>(band.hi(i) - lo, 0);
    T* gq = dq.at(gi, t0);
    if (nk == 0) {
      for (int64_t a = 0; a < rows; ++a) std::fill(gq + a * dq.st, gq + a * dq.st + d, T(0));
      continue;
    }
    const T* qb = in.q.at(gi, t0);
    const T* kb = in.k.at(gi, lo);
    const T* vb = in.v.at(gi, lo);
    const T* gb = dout.at(gi, t0);
    if (saved) {  // P saved by the forward: δ_t = Σ_j P_tj dP_tj (= dO_t · O_t), no QKᵀ
      const T* pw = saved->at(gi, i);
      gemm<T>(false, true, rows, nk, dv, T(1), gb, dout.st, vb, in.v.st, T(0), ds, nk);
      for (int64_t a = 0; a < rows; ++a) {  // dS = P ∘ (dP - δ)
        T* dsr = ds + a * nk;
        const T* pr = pw + a * nk;
        const T da = dot(pr, dsr, nk);
        for (int64_t c2 = 0; c2 < nk; ++c2) dsr[c2] = pr[c2] * (dsr[c2] - da);
      }
      gemm<T>(false, false, rows, d, nk, scale, ds, nk, kb, in.k.st, T(0), gq, dq.st);
      gemm<T>(true, false, nk, d, rows, scale, ds, nk, qb, in.q.st, T(1), dk.at(gi, lo), dk.st);
      gemm<T>(true, false, nk, dv, rows, T(1), pw, nk, gb, dout.st, T(1), dv_.at(gi, lo),
              dv_.st);
      continue;
    }
    const T* ob = out.at(gi, t0);
    const T* l = lse + gi * band.tq + t0;
    gemm<T>(false, true, rows, nk, d, scale, qb, in.q.st, kb, in.k.st, T(0), p, nk);
    band_softmax<T>(p, rows, nk, t0, lo, band, in.keep_of(gi), l, nullptr, nullptr);
    gemm<T>(false, true, rows, nk, dv, T(1), gb, dout.st, vb, in.v.st, T(0), ds, nk);
    for (int64_t a = 0; a < rows; ++a)  // δ_t = dO_t · O_t
      delta[a] = dot(gb + a * dout.st, ob + a * out.st, dv);
    for (int64_t a = 0; a < rows; ++a) {  // dS = P ∘ (dP - δ)
      T* dsr = ds + a * nk;
      const T* pr = p + a * nk;
      const T da = delta[a];
      for (int64_t c2 = 0; c2 < nk; ++c2) dsr[c2] = pr[c2] * (dsr[c2] - da);
    }
    // dQ = dS K / √d; dK[lo:hi] += dSᵀ Q / √d; dV[lo:hi] += Pᵀ dO
    gemm<T>(false, false, rows, d, nk, scale, ds, nk, kb, in.k.st, T(0), gq, dq.st);
    gemm<T>(true, false, nk, d, rows, scale, ds, nk, qb, in.q.st, T(1), dk.at(gi, lo), dk.st);
    gemm<T>(true, false, nk, dv, rows, T(1), p, nk, gb, dout.st, T(1), dv_.at(gi, lo), dv_.st);
  }
}

// dk and dv are overwritten (any content on entry). Where an operand's rows lie apart, each
// chunk of a group of STAGE_GROUP slices is staged: its queries' and keys' rows of every operand
// copied into contiguous buffers, its dQ copied back and its dK, dV added back. When one chunk
// holds every block of a slice (the Sparse Transformer's residue classes: the radius spans the
// class), only its dK, dV are accumulated in contiguous buffers: the GEMMs read the operands
// and write dQ in place (6% less time than staging every operand, docs/sparse.md, run 6), and
// as no other chunk reaches its keys, its dK, dV are copied in, not added, and the rows it does
// not reach zeroed: dk and dv are never zeroed first nor read. Otherwise the chunks accumulate
// into dk and dv (β = 1), zeroed here first, slice by slice in parallel.
// With ``saved`` (the forward's P), out and lse are not read (nor staged).
template <typename T>
void backward_impl(const Inputs<T>& in, const Mat<T>& out, const T* lse, const Mat<T>& dout,
                   const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv_, const Band& band,
                   const Weights<T>* saved = nullptr) {
  const int64_t bq = band.block, d = in.d, dv = in.dv;
  const bool stage = in.q.rows_apart(d) || in.k.rows_apart(d) || in.v.rows_apart(dv) ||
                     (!saved && out.rows_apart(dv)) || dout.rows_apart(dv) || dq.rows_apart(d) ||
                     dk.rows_apart(d) || dv_.rows_apart(dv);
  const int64_t group = stage ? STAGE_GROUP : 1, groups = (in.g + group - 1) / group;
  const auto schedule = colours(band);
  const bool whole = stage && schedule[0].size() == 1 && schedule[1].empty();
  const bool stream = in.g * band.tk * d * int64_t(sizeof(T)) >= STREAM_BYTES;  // dK's size
  if (!whole)
    at::parallel_for(0, in.g, 1, [&](int64_t begin, int64_t end) {
      zero_rows(dk, begin, end - begin, 0, band.tk, d);
      zero_rows(dv_, begin, end - begin, 0, band.tk, dv);
    });
  for (const auto& chunks : schedule) {  // chunks of one colour run in parallel
    const int64_t mine = (int64_t)chunks.size();
    at::parallel_for(0, groups * mine, 1, [&](int64_t begin, int64_t end) {
      const OwnThreadBlas alone;
      std::vector<T> p(bq * band.span()), ds(bq * band.span()), delta(bq);
      Staged<T> sq, sk, sv, so, sg, sdq, sdk, sdv;
      for (int64_t w = begin; w < end; ++w) {
        const int64_t g0 = (w / mine) * group, count = std::min(group, in.g - g0);
        const auto [first, stop] = chunks[w % mine];
        if (!stage) {
          backward_blocks(in, out, lse, dout, dq, dk, dv_, band, g0, first, stop, p.data(),
                          ds.data(), delta.data(), saved);
          continue;
        }
        // the chunk's queries [a0, a0 + na) and the keys [k0, k0 + nk) its blocks reach
        const int64_t a0 = first * bq, na = std::min(band.tq, stop * bq) - a0;
        const int64_t k0 = band.lo(first), nk = std::max<int64_t>(0, band.hi(stop - 1) - k0);
        const Mat<T> gk = sdk.view(g0, count, k0, nk, d), gv = sdv.view(g0, count, k0, nk, dv);
        std::fill(sdk.buf.begin(), sdk.buf.end(), T(0));
        std::fill(sdv.buf.begin(), sdv.buf.end(), T(0));
        if (whole) {  // the chunk is the slice: the GEMMs read its rows in place (any leading
          // dimension) and write dQ in place, once a row; only dK and dV, which every block
          // adds into, are accumulated in contiguous rows, then copied in
          for (int64_t c = 0; c < count; ++c)
            backward_blocks(in, out, lse, dout, dq, gk, gv, band, g0 + c, first, stop, p.data(),
                            ds.data(), delta.data(), saved);
          copy_rows(gk, dk, g0, count, k0, nk, d, false, stream);
          copy_rows(gv, dv_, g0, count, k0, nk, dv, false, stream);
          for (const auto& [m, width] : {std::pair{dk, d}, std::pair{dv_, dv}}) {
            zero_rows(m, g0, count, 0, k0, width);  // the keys no query reaches
            zero_rows(m, g0, count, k0 + nk, band.tk - k0 - nk, width);
          }
          continue;
        }
        Inputs<T> staged = in;
        staged.q = sq.view(g0, count, a0, na, d);
        staged.k = sk.view(g0, count, k0, nk, d);
        staged.v = sv.view(g0, count, k0, nk, dv);
        const Mat<T> o = so.view(g0, count, a0, na, dv), g = sg.view(g0, count, a0, na, dv);
        const Mat<T> gq = sdq.view(g0, count, a0, na, d);
        copy_rows(in.q, staged.q, g0, count, a0, na, d, false);
        copy_rows(in.k, staged.k, g0, count, k0, nk, d, false);
        copy_rows(in.v, staged.v, g0, count, k0, nk, dv, false);
        if (!saved) copy_rows(out, o, g0, count, a0, na, dv, false);
        copy_rows(dout, g, g0, count, a0, na, dv, false);
        for (int64_t c = 0; c < count; ++c)
          backward_blocks(staged, o, lse, g, gq, gk, gv, band, g0 + c, first, stop, p.data(),
                          ds.data(), delta.data(), saved);
        copy_rows(gq, dq, g0, count, a0, na, d, false);  // dQ rows are the chunk's own
        copy_rows(gk, dk, g0, count, k0, nk, d, true);  // dK, dV rows: another chunk's too
        copy_rows(gv, dv_, g0, count, k0, nk, dv, true);
      }
    });
  }
}

// (G, T, E) or (G1, G2, T, E) on the CPU with unit stride along E (any other strides; rows
// may not overlap: the stride along T is at least E)
void check(const torch::Tensor& x, const char* name, int64_t dims) {
  const int64_t e = x.dim() - 1;
  TORCH_CHECK(x.device().is_cpu() && x.dim() == dims && (x.size(e) <= 1 || x.stride(e) == 1) &&
                  (x.size(e - 1) <= 1 || x.stride(e - 1) >= x.size(e)),
              name, ": a CPU tensor (G, T, D) with unit stride along D is needed (rows "
              "apart by at least D; any stride along G)");
}

// x (G, T, E) or (G1, G2, T, E) as a Mat
template <typename T>
Mat<T> mat_of(const torch::Tensor& x) {
  const int64_t n = x.dim();
  const int64_t st = x.size(n - 2) <= 1 ? std::max<int64_t>(1, x.size(n - 1)) : x.stride(n - 2);
  if (n == 3) return Mat<T>{x.data_ptr<T>(), 1, x.stride(0), 0, st};
  return Mat<T>{x.data_ptr<T>(), std::max<int64_t>(1, x.size(1)), x.stride(0), x.stride(1), st};
}

// the (G1, G2) of a 4-D operand must be the query's
void same_slices(const torch::Tensor& x, const torch::Tensor& q, const char* name) {
  TORCH_CHECK(x.dim() == q.dim() && x.size(0) == q.size(0) &&
                  (x.dim() == 3 || x.size(1) == q.size(1)),
              name, ": the same leading dims as the query are needed; got ", x.sizes(), " and ",
              q.sizes());
}

Band make_band(const torch::Tensor& q, const torch::Tensor& k, int64_t r, bool causal,
               int64_t block) {
  TORCH_CHECK(r >= 0 && block >= 1, "radius >= 0 and block >= 1 are needed");
  const int64_t t = q.dim() - 2;
  return Band{q.size(t), k.size(t), r, block, causal};
}

int64_t slices(const torch::Tensor& q) { return q.dim() == 3 ? q.size(0) : q.size(0) * q.size(1); }

template <typename T>
Inputs<T> inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const c10::optional<torch::Tensor>& keep) {
  const int64_t dims = q.dim();
  TORCH_CHECK(dims == 3 || dims == 4, "band attention: query (G, Tq, D) is needed; got ",
              q.sizes());
  check(q, "query", dims);
  check(k, "keys", dims);
  check(v, "values", dims);
  const int64_t t = dims - 2;
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && v.size(t) == k.size(t) &&
                  k.size(t + 1) == q.size(t + 1) &&
                  (dims == 3 || (k.size(1) == q.size(1) && v.size(1) == q.size(1))),
              "band attention: query (G, Tq, D), keys (G, Tk, D), values (G, Tk, Dv) are "
              "needed; got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "band attention: query, keys and values must share one dtype");
  const int64_t g = slices(q);
  const bool* kp = nullptr;
  int64_t ks = 0;
  if (keep && keep->defined()) {
    TORCH_CHECK(keep->scalar_type() == torch::kBool && keep->dim() == 2 &&
                    keep->is_contiguous() && keep->size(1) == k.size(t) &&
                    (keep->size(0) == 1 || keep->size(0) == g),
                "keep: a contiguous bool (1 | G, Tk) mask is needed");
    kp = keep->data_ptr<bool>();
    ks = keep->size(0) == 1 ? 0 : k.size(t);
  }
  return Inputs<T>{mat_of<T>(q), mat_of<T>(k), mat_of<T>(v), kp, ks,
                   g, q.size(t + 1), v.size(t + 1)};
}

void check_out(const torch::Tensor& x, const torch::Tensor& like, int64_t width,
               const char* name) {
  check(x, name, like.dim());
  same_slices(x, like, name);
  const int64_t t = like.dim() - 2;
  TORCH_CHECK(x.scalar_type() == like.scalar_type() && x.size(t) == like.size(t) &&
                  x.size(t + 1) == width,
              name, ": the shape ", like.sizes(), " with last dim ", width, " and its dtype are "
              "needed; got ", x.sizes());
}

// a backward pass's incoming gradient (q's shape, Dv wide) and dq, dk, dv (q's and k's, D and
// Dv wide)
void check_grads(const torch::Tensor& dout, const torch::Tensor& dq, const torch::Tensor& dk,
                 const torch::Tensor& dv, const torch::Tensor& q, const torch::Tensor& k,
                 int64_t d, int64_t dvw) {
  check_out(dout, q, dvw, "grad");
  check_out(dq, q, d, "dq");
  check_out(dk, k, d, "dk");
  check_out(dv, k, dvw, "dv");
}

}  // namespace

// Forward into ``out`` (the query's leading dims and length, Dv wide; any strides with unit
// stride along Dv): -> lse (G, Tq) with G = G1 · G2 for 4-D operands.
torch::Tensor band_forward_into(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                                torch::Tensor out, int64_t radius, bool causal,
                                c10::optional<torch::Tensor> keep, int64_t block) {
  const Band band = make_band(q, k, radius, causal, block);
  auto lse = torch::empty({slices(q), band.tq}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "band_forward", [&] {
    const auto in = inputs<scalar_t>(q, k, v, keep);
    check_out(out, q, in.dv, "out");
    forward_impl<scalar_t>(in, mat_of<scalar_t>(out), lse.data_ptr<scalar_t>(), band);
  });
  return lse;
}

std::vector<torch::Tensor> band_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                                        int64_t radius, bool causal,
                                        c10::optional<torch::Tensor> keep, int64_t block) {
  check(q, "query", 3);
  check(v, "values", 3);
  auto out = torch::empty({q.size(0), q.size(1), v.size(2)}, q.options());
  auto lse = band_forward_into(q, k, v, out, radius, causal, keep, block);
  return {out, lse};
}

// Backward into dq, dk, dv (the shapes of q, k, v; any content on entry: every row is
// written), for the incoming gradient dout and the forward's out and lse.
void band_backward_into(torch::Tensor dout, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                        torch::Tensor out, torch::Tensor lse, torch::Tensor dq, torch::Tensor dk,
                        torch::Tensor dv, int64_t radius, bool causal,
                        c10::optional<torch::Tensor> keep, int64_t block) {
  const Band band = make_band(q, k, radius, causal, block);
  lse = lse.contiguous();  // the forward's own: already contiguous, no copy
  TORCH_CHECK(lse.dim() == 2 && lse.size(0) == slices(q) && lse.size(1) == band.tq &&
                  lse.scalar_type() == q.scalar_type(),
              "band attention backward: lse (G, Tq) of the forward is needed");
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "band_backward", [&] {
    const auto in = inputs<scalar_t>(q, k, v, keep);
    check_out(out, q, in.dv, "out");
    check_grads(dout, dq, dk, dv, q, k, in.d, in.dv);
    backward_impl<scalar_t>(in, mat_of<scalar_t>(out), lse.data_ptr<scalar_t>(),
                            mat_of<scalar_t>(dout), mat_of<scalar_t>(dq), mat_of<scalar_t>(dk),
                            mat_of<scalar_t>(dv), band);
  });
}

std::vector<torch::Tensor> band_backward(torch::Tensor dout, torch::Tensor q, torch::Tensor k,
                                         torch::Tensor v, torch::Tensor out, torch::Tensor lse,
                                         int64_t radius, bool causal,
                                         c10::optional<torch::Tensor> keep, int64_t block) {
  check(q, "query", 3);
  check(k, "keys", 3);
  check(v, "values", 3);
  TORCH_CHECK(dout.dim() == 3 && out.dim() == 3 && dout.sizes() == out.sizes() &&
                  out.size(0) == q.size(0) && out.size(1) == q.size(1) &&
                  out.size(2) == v.size(2) && dout.scalar_type() == q.scalar_type() &&
                  out.scalar_type() == q.scalar_type(),
              "band attention backward: grad and out (G, Tq, Dv), lse (G, Tq) of the forward "
              "are needed");
  auto dq = torch::empty(q.sizes(), q.options());  // contiguous, whatever q's strides
  auto dk = torch::empty(k.sizes(), k.options());  // zeroed by the kernel where it adds
  auto dv = torch::empty(v.sizes(), v.options());
  band_backward_into(dout, q, k, v, out, lse, dq, dk, dv, radius, causal, keep, block);
  return {dq, dk, dv};
}

// Forward into ``out`` as ``band_forward_into`` (query blocks of ``block``), keeping the
// normalised weights P for a backward pass with query blocks of ``backward_block`` (a divisor
// of ``block``): -> [lse (G, Tq), weights (G, S)], S = the values per slice
// (``Band::offsets``), on the cache's memory (``cached_empty``). The context is the same as without.
std::vector<torch::Tensor> band_forward_saving(torch::Tensor q, torch::Tensor k,
                                               torch::Tensor v, torch::Tensor out,
                                               int64_t radius, bool causal,
                                               c10::optional<torch::Tensor> keep,
                                               int64_t block, int64_t backward_block) {
  const Band band = make_band(q, k, radius, causal, block);
  const Band later = make_band(q, k, radius, causal, backward_block);
  TORCH_CHECK(block % backward_block == 0, "forward_saving: the backward's block (",
              backward_block, ") must divide the forward's (", block, ")");
  auto lse = torch::empty({slices(q), band.tq}, q.options());
  auto weights = cached_empty({slices(q), later.offsets().back()}, q);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "band_forward_saving", [&] {
    const auto in = inputs<scalar_t>(q, k, v, keep);
    check_out(out, q, in.dv, "out");
    const Weights<scalar_t> saved(weights.data_ptr<scalar_t>(), later);
    forward_impl<scalar_t>(in, mat_of<scalar_t>(out), lse.data_ptr<scalar_t>(), band, &saved);
  });
  return {lse, weights};
}

// Backward into dq, dk, dv (overwritten, as ``band_backward_into``) from the weights that
// ``band_forward_saving`` kept, with its radius, causal, keep and backward_block: four GEMMs a
// block (dP = dO Vᵀ, dQ, dK, dV), no QKᵀ nor exponentials, and neither out nor lse read.
void band_backward_saved(torch::Tensor dout, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                         torch::Tensor weights, torch::Tensor dq, torch::Tensor dk,
                         torch::Tensor dv, int64_t radius, bool causal,
                         c10::optional<torch::Tensor> keep, int64_t block) {
  const Band band = make_band(q, k, radius, causal, block);
  TORCH_CHECK(weights.dim() == 2 && weights.is_contiguous() && weights.size(0) == slices(q) &&
                  weights.size(1) == band.offsets().back() &&
                  weights.scalar_type() == q.scalar_type(),
              "band attention backward: the weights (G, S) that forward_saving returned for "
              "this radius, causal and block are needed");
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "band_backward_saved", [&] {
    const auto in = inputs<scalar_t>(q, k, v, keep);
    check_grads(dout, dq, dk, dv, q, k, in.d, in.dv);
    const Weights<scalar_t> saved(weights.data_ptr<scalar_t>(), band);
    const auto g = mat_of<scalar_t>(dout);
    backward_impl<scalar_t>(in, g, nullptr, g, mat_of<scalar_t>(dq), mat_of<scalar_t>(dk),
                            mat_of<scalar_t>(dv), band, &saved);
  });
}

// For tests: the BLAS threads one worker of our parallel regions sees, inside
// ``OwnThreadBlas`` and after it: [inside, after] (MKL), or [] without MKL.
std::vector<int64_t> blas_threads() {
  if (!MKL_Set_Num_Threads_Local || !MKL_Get_Max_Threads) return {};
  int64_t inside;
  {
    const OwnThreadBlas alone;
    inside = MKL_Get_Max_Threads();
  }
  return {inside, MKL_Get_Max_Threads()};
}

// The backward's schedule, for tests: the [first, stop) blocks of each colour's chunks.
std::vector<std::vector<std::pair<int64_t, int64_t>>> backward_chunks(
    int64_t tq, int64_t tk, int64_t radius, bool causal, int64_t block) {
  return colours(Band{tq, tk, radius, block, causal});
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("backward_chunks", &backward_chunks, "the backward pass's chunks of blocks");
  m.def("blas_threads", &blas_threads, "MKL's threads inside a worker's share and after");
  m.def("forward", &band_forward, "banded flash attention, forward");
  m.def("backward", &band_backward, "banded flash attention, backward");
  m.def("forward_into", &band_forward_into, "forward into a given out (4-D views too); -> lse");
  m.def("backward_into", &band_backward_into, "backward into given dq, dk, dv (overwritten)");
  m.def("cached_empty", &cached_empty, "an empty tensor on memory the cache takes back");
  m.def("cache_release", &cache_release, "the cached blocks back to the system: -> bytes");
  m.def("cache_held", &cache_held, "the bytes cached now");
  m.def("cache_limit", &cache_limit, "the most bytes kept cached: -> the previous limit");
  m.def("forward_saving", &band_forward_saving,
        "forward into a given out, keeping the weights: -> [lse, weights]");
  m.def("backward_saved", &band_backward_saved,
        "backward into given dq, dk, dv from forward_saving's weights");
}
