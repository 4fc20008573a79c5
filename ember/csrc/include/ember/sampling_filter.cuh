// Sampling, renormalisation and masking under top-k, top-p and min-p filters (sm_90+; the
// family's shared pieces are in sampling.cuh): "thresholds without sorting" (a radix select over
// the row held by a cluster); sampling from probabilities (or fp32 logits under top-k or min-p)
// over many rows streams each row through one CTA that keeps only its candidates
// (filter_stream_kernel, "in one streaming pass"). Which kernel takes a shape: launch_filter, at
// the end.
#pragma once

#include "ember/sampling.cuh"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace sampling {

// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so each (seed, offset, row)
// gives the same numbers on any GPU and in any launch order.
__device__ __forceinline__ uint4 philox(uint4 c, uint2 k) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const unsigned long long p0 = static_cast<unsigned long long>(0xD2511F53u) * c.x;
    const unsigned long long p1 = static_cast<unsigned long long>(0xCD9E8D57u) * c.z;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += 0x9E3779B9u;
    k.y += 0xBB67AE85u;
  }
  return c;
}

// A uniform float in [0, 1) for (seed, offset, stream): 24 random bits.
__device__ __forceinline__ float uniform01(uint64_t seed, uint64_t offset, uint64_t stream) {
  const uint4 r =
      philox(make_uint4(static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                        static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)),
             make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)));
  return static_cast<float>(r.x >> 8) * (1.f / 16777216.f);
}

// Block-wide exclusive prefix sum of one value per thread; `total` gets the block's sum.
__device__ __forceinline__ float block_exclusive_scan(float v, float* scratch, float* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float inc = v;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const float w = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += w;
  }
  if (lane == 31) scratch[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kSoftmaxThreads / 32 ? scratch[lane] : 0.f;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const float x = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += x;
    }
    if (lane < kSoftmaxThreads / 32) scratch[lane] = w;  // inclusive warp totals
  }
  __syncthreads();
  const float before = (warp > 0 ? scratch[warp - 1] : 0.f) + inc - v;
  *total = scratch[kSoftmaxThreads / 32 - 1];
  __syncthreads();  // scratch is reused
  return before;
}

// Keys whose unsigned order is the float order (-0 sorts just below +0; NaN never gets here).
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

// The float whose order_key is `k`.
__device__ __forceinline__ float from_order_key(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) != 0u ? (k & 0x7fffffffu) : ~k);
}

// max(a, b), NaN if either is (fmaxf returns the other operand).
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

#ifndef EMBER_FILTER_LEAN
#define EMBER_FILTER_LEAN 1  // NOTE: 0 = the full passes (keys, rest, level 1, sampling; A/B)
#endif
// EMBER_FILTER_LEAN: fewer instructions a value in the filters' passes, same thresholds and draws
// (docs/perf/notes/act.md): key_of below; level 0's mass below the cut added in 32 bits; level 1
// appends survivors one atomic a match instead of a warp vote every step; the sampling pass does
// not zero the values below the threshold in shared memory.
// order_key for rows the filters hold as non-negative values (probabilities, exponentials of
// logits; -0 made +0 on load): their sign bit is clear, so the key is the bits with it set, one
// instruction instead of three. NONNEG = false: order_key (logits to mask).
template <bool NONNEG>
__device__ __forceinline__ uint32_t key_of(float x) {
  return NONNEG ? (__float_as_uint(x) | 0x80000000u) : order_key(x);
}

// Inverse-CDF sampling over a row split across the cluster, the chunk already in shared memory
// (layout as softmax_kernel); elements whose key is below `tau` count as 0 (and are zeroed). Each
// thread owns a contiguous segment [lo, hi) of its CTA's chunk; the CTAs exchange their totals,
// every CTA draws the same u, and the thread whose segment holds u * total scans it for the first
// index whose running sum exceeds the target. Rounding can leave a target just past a sum: then
// the last element with mass before it is taken, so an element of probability 0 is never
// returned. A row whose total is not finite and positive gets -1. Ends with every remote read of
// this CTA's shared memory done (CTAs may leave).
template <bool NONNEG>
__device__ __forceinline__ void sample_chunk(cooperative_groups::cluster_group& cluster, float* v,
                                             int n, int lo, int hi, uint32_t tau, int64_t row,
                                             int64_t begin, uint64_t seed, uint64_t offset,
                                             int32_t* samples, float* exchange, float* scratch) {
  __shared__ int found;
  __shared__ float warp_end[kSoftmaxThreads / 32];
  __shared__ int warp_nz[kSoftmaxThreads / 32];
  const int rank = static_cast<int>(cluster.block_rank());
  if (threadIdx.x == 0) found = 0;
  float mine = 0.f;
  int last_nonzero = -1;
  // The value element i counts with: 0 below the threshold.
  auto kept = [&](int i) {
    const float x = v[i];
    return tau != 0u && key_of<NONNEG>(x) < tau ? 0.f : x;
  };
  for (int i = lo; i < hi; ++i) {
    float x = v[i];
    if (tau != 0u && key_of<NONNEG>(x) < tau) {
      x = 0.f;
      // NOTE: lean keys leave the chunk as it is (the owner's scan applies the threshold
      // again) rather than a shared-memory store for nearly every value of the row
      if (!EMBER_FILTER_LEAN) v[i] = 0.f;
    }
    mine += x;
    if (x > 0.f) last_nonzero = i;
  }
  float block_total;
  const float prefix = block_exclusive_scan(mine, scratch, &block_total);
  // The segments' ranges share their edges: [start, end) with start = the previous thread's end
  // (in float, prefix + mine of one thread need not equal the next thread's prefix), so exactly
  // one thread holds any target below the last end. prev_nz: the last element with mass before
  // this thread's segment.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float end = prefix + mine;
  float start = __shfl_up_sync(0xffffffffu, end, 1);
  int nz_incl = last_nonzero;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int x = __shfl_up_sync(0xffffffffu, nz_incl, o);
    if (lane >= o) nz_incl = max(nz_incl, x);
  }
  int prev_nz = __shfl_up_sync(0xffffffffu, nz_incl, 1);
  if (lane == 31) {
    warp_end[warp] = end;
    warp_nz[warp] = nz_incl;
  }
  __syncthreads();
  int before_warp_nz = -1;
  for (int w = 0; w < warp; ++w) before_warp_nz = max(before_warp_nz, warp_nz[w]);
  if (lane == 0) {
    start = warp > 0 ? warp_end[warp - 1] : 0.f;
    prev_nz = before_warp_nz;
  } else {
    prev_nz = max(prev_nz, before_warp_nz);
  }
  if (threadIdx.x == 0) exchange[0] = block_total;
  cluster.sync();
  float before = 0.f, total = 0.f;
  int last_rank = -1;  // the last CTA with mass
#pragma unroll
  for (int r = 0; r < kSoftmaxCluster; ++r) {
    const float t = cluster.map_shared_rank(exchange, r)[0];
    if (r < rank) before += t;
    total += t;
    if (t > 0.f) last_rank = r;
  }
  cluster.sync();  // every remote read is done: CTAs may leave from here on
  if (!(total > 0.f) || !isfinite(total)) {
    if (rank == 0 && threadIdx.x == 0) samples[row] = -1;
    return;
  }
  const float target = uniform01(seed, offset, static_cast<uint64_t>(row)) * total;
  const bool owner =
      block_total > 0.f && target >= before && (target < before + block_total || rank == last_rank);
  if (!owner) return;
  const float local = target - before;
  if (local >= start && local < end) {  // the one thread whose range holds the target
    int pick;
    if (mine > 0.f) {
      float run = start;
      pick = last_nonzero;  // rounding left the target past the running sum: the last mass
      for (int i = lo; i < hi; ++i) {
        const float x = EMBER_FILTER_LEAN ? kept(i) : v[i];
        run += x;
        if (run > local && x > 0.f) {
          pick = i;
          break;
        }
      }
    } else {
      pick = prev_nz;  // an empty segment's range is only rounding: the mass just before it
    }
    if (pick >= 0) {
      samples[row] = static_cast<int32_t>(begin + pick);
      found = 1;
    }
  }
  __syncthreads();
  if (found == 0) {  // `local` past the last end (rounding): the block's last mass, before it
    int idx = last_nonzero;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) idx = max(idx, __shfl_xor_sync(0xffffffffu, idx, o));
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = static_cast<float>(idx);
    __syncthreads();
    if (threadIdx.x == 0) {
      int best = -1;
      for (int w = 0; w < kSoftmaxThreads / 32; ++w) best = max(best, static_cast<int>(scratch[w]));
      samples[row] = static_cast<int32_t>(begin + best);
    }
  }
}

// --- thresholds without sorting -------------------------------------------------------------
//
// Top-k and top-p keep every element whose value is >= a threshold; the threshold is found by a
// most-significant-digit radix select over the row held in the cluster's shared memory: four
// passes of 8 bits over order-preserving keys, each pass a 256-bin histogram (count and mass) of
// the elements that still match the digits chosen so far; the cluster's CTAs add each other's
// histograms through distributed shared memory and all pick the same bin. Masses are fixed point
// (value / row max * 2^40, truncated) in 64-bit integers, so the sums do not depend on the order
// of the atomics: the same input gives the same threshold, and the same tokens for a seed.

constexpr float kMassScale = 1099511627776.f;  // 2^40: a row's largest value in fixed point

// A block's fp64 sum in a fixed order (lane 0's butterfly a warp, then the warps in turn), so
// the same inputs give the same bits on every run. `scratch`: one double a warp.
__device__ __forceinline__ double block_sum_fixed(double v, double* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double all = 0.0;
#pragma unroll
  for (int w = 0; w < kSoftmaxThreads / 32; ++w) all += scratch[w];
  __syncthreads();  // scratch is reused
  return all;
}

// A row's fp64 sum in radix_select's fixed point (`scale` = 2^40 / the row's largest mass).
__device__ __forceinline__ unsigned long long row_mass_fixed(double sum, float scale) {
  return __double2ull_rz(sum * static_cast<double>(scale));
}

__device__ __forceinline__ unsigned long long fixed_mass(float x, float scale) {
  return __float2ull_rz(x * scale);
}

constexpr int kBins = 256;

#ifndef EMBER_FILTER_COMPACT
#define EMBER_FILTER_COMPACT 1  // NOTE: 0 = levels 2-3 walk the whole chunk (the v2 kernel; A/B)
#endif
#ifndef EMBER_FILTER_LEAN0
#define EMBER_FILTER_LEAN0 1  // NOTE: 0 = level 0 merges runs of equal bins (radix_select; A/B)
#endif
// NOTE: level 0 in two phases, mark then walk the marks: 2 = in the mass (top-p) selects only, 1 =
// in every select, 0 = never (A/B; session 9, with the lean passes: top-p 110.9 / 105.7 / 110.2
// us for 0 / 1 / 2, top-k + top-p from logits 136.7 / 140.4 / 140.4)
#ifndef EMBER_FILTER_SPLIT0
#define EMBER_FILTER_SPLIT0 0
#endif
#ifndef EMBER_FILTER_RELATIVE
#define EMBER_FILTER_RELATIVE 1  // NOTE: 0 = absolute digits 24/16/8/0 (radix_select; A/B)
#endif
// Capacity of the per-CTA survivor list (4 KB: 3 CTAs of 64 KB rows still fit an SM).
constexpr int kSurvivors = 1024;

struct RadixSmem {
  // Double-buffered: a pass fills one set while peers may still read the other. A bin's mass is
  // hi * 2^32 + lo: Hopper has no native 64-bit shared-memory atomic add (it is a CAS loop,
  // which serialised the first version: 440 us for top-p over 128 x 128 256), so the 64-bit sum
  // is two 32-bit atomic adds with the carry taken from the returned old value.
  unsigned cnt[2][kBins];
  unsigned mass_lo[2][kBins];
  unsigned mass_hi[2][kBins];
  unsigned long long warp_sum[kBins / 32];  // scan carries
  unsigned long long rest[2];               // this CTA's elements in [floor, cut) (level 0)
#if EMBER_FILTER_COMPACT
  float survivors[kSurvivors];  // the values level 1 histogrammed, for levels 2 and 3
  int n_survivors;
#endif
  struct Pick {
    int bin;
    bool exact;  // the bin ends exactly at the target: all of it is kept
    unsigned long long above;
  } pick[2];
};

__device__ __forceinline__ void add_mass(unsigned* lo, unsigned* hi, unsigned long long m) {
  const unsigned l = static_cast<unsigned>(m);
  const unsigned old = atomicAdd(lo, l);
  const unsigned carry = old + l < old ? 1u : 0u;
  const unsigned h = static_cast<unsigned>(m >> 32) + carry;
  if (h != 0u) atomicAdd(hi, h);
}

// The threshold key (keep elements whose key is >= it) that keeps, among the elements of the row
// whose key is >= `floor` ([lo, hi): this thread's segment; all CTAs of the cluster call in step):
// BY_MASS = false: the `want` largest (ties at the boundary all kept; want >= 1 and at most the
// number of such elements); BY_MASS: the largest elements whose fixed-point mass first reaches
// ceil(ratio * their total mass) (at least the largest element).
//
// Level 0 first histograms only keys >= `cut` (a bound below which a peaked row's answer
// practically never lies: most of a vocabulary sits far below its maximum), adding the rest up
// in registers; if the answer turns out to lie below the cut the select starts over without it.
//
// BY_MASS with floor 0 (no top-k before it): the target is a share of `row_mass`, the row's
// fp64 sum in fixed point (row_mass_fixed; at least what the histograms hold), not of the sum
// of the elements' truncated masses, so a kernel that never holds the whole row
// (filter_stream_kernel) finds the same target. C: the CTAs of the cluster holding the row.
// CANDIDATES (filter_stream_kernel: `v` holds only the values at or above the cut, and some
// below it): an answer below the cut returns 0 (the caller falls back) instead of starting over.
template <bool BY_MASS, bool NONNEG, int C = kSoftmaxCluster, bool CANDIDATES = false>
__device__ uint32_t radix_select(cooperative_groups::cluster_group& cluster, RadixSmem& h,
                                 int& pass, const float* v, int lo, int hi, float scale,
                                 uint32_t floor, uint32_t cut, unsigned long long want, float ratio,
                                 unsigned long long row_mass = 0ull) {
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % 32, warp = t / 32;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const uint32_t bound = attempt == 0 && cut > floor ? cut : floor;
    // Digits over key - origin. Keys >= a bound at or above the cut (the row maximum's key less 16
    // exponents) span at most 2^27, so with the relative layout their offsets from the bound
    // need 28 bits and level 0's digit (offset >> 20, at most 128) spreads over the bins
    // instead of piling onto the few exponents a peaked row has (tools/radix_emulate.py
    // --relative models it).
    const bool relative = EMBER_FILTER_RELATIVE && cut != 0u && bound >= cut;
    const uint32_t origin = relative ? bound : 0u;
    auto shift_of = [relative](int level) {  // relative: 20, 12, 4, 0; else 24, 16, 8, 0
      return relative ? max(20 - 8 * level, 0) : 24 - 8 * level;
    };
    uint32_t prefix = 0;
    unsigned long long need = want;
    bool retry = false;
    for (int level = 0; level < 4; ++level) {
      const int shift = shift_of(level);
      const uint32_t high = level == 0 ? 0u : ~0u << shift_of(level - 1);
      const uint32_t digit = level == 0 ? 255u : (1u << (shift_of(level - 1) - shift)) - 1u;
      const int buf = pass++ & 1;
      // One value into this level's histogram: its digit's bin gains its mass (or 1).
      auto add_to_bin = [&](float x, uint32_t k) {
        const int bin = static_cast<int>(((k - origin) >> shift) & digit);
        if (BY_MASS) {
          add_mass(&h.mass_lo[buf][bin], &h.mass_hi[buf][bin], fixed_mass(x, scale));
        } else {
          atomicAdd(&h.cnt[buf][bin], 1u);
        }
      };
      if (t < kBins) {
        if (BY_MASS) {
          h.mass_lo[buf][t] = 0;
          h.mass_hi[buf][t] = 0;
        } else {
          h.cnt[buf][t] = 0;
        }
      }
      if (t == 0) {
        h.pick[buf].bin = -1;
        h.rest[buf] = 0;
#if EMBER_FILTER_COMPACT
        if (level == 1) h.n_survivors = 0;
#endif
      }
      __syncthreads();
      unsigned long long rest = 0;  // level 0: the mass (or count) of [floor, bound)
      // NOTE: with lean keys the lean level 0 adds it up in 32 bits: below the cut a value's
      // fixed-point mass is under 2^24 (the cut is the row maximum's 2^-16, the maximum 2^40), and
      // a segment holds at most 115 values, so a thread's sum stays under 2^31.
      uint32_t rest32 = 0;
#if EMBER_FILTER_COMPACT
      // Levels 2 and 3 walk the list level 1 gathered (when it fit) instead of the whole chunk:
      // a peaked row's chosen level-0 bin holds a few dozen of a CTA's 16 000 values.
      if (level >= 2 && h.n_survivors <= kSurvivors) {
        for (int i = t; i < h.n_survivors; i += static_cast<int>(blockDim.x)) {
          const float x = h.survivors[i];
          const uint32_t k = key_of<NONNEG>(x);
          if (((k - origin) & high) != prefix) continue;
          add_to_bin(x, k);
        }
      } else if (EMBER_FILTER_LEAN && level == 1) {
        // Each value level 1 histograms is also appended to the survivor list, one atomic a
        // value: a peaked row's chosen level-0 bin holds a few dozen of a CTA's values, so the
        // atomics are few, and the other values skip the warp vote's per-step cost.
        for (int i = lo; i < hi; ++i) {
          const float x = v[i];
          const uint32_t k = key_of<NONNEG>(x);
          if (k >= bound && ((k - origin) & high) == prefix) {
            const int at = atomicAdd(&h.n_survivors, 1);
            if (at < kSurvivors) h.survivors[at] = x;
            add_to_bin(x, k);
          }
        }
      } else if (level == 1) {
        // The whole segment, every lane the same number of steps so the warp can vote: each
        // value level 1 histograms is also appended to the survivor list (one atomic a warp).
        int steps = hi - lo;
#pragma unroll
        for (int o = 16; o > 0; o /= 2) steps = max(steps, __shfl_xor_sync(0xffffffffu, steps, o));
        for (int j = 0; j < steps; ++j) {
          const int i = lo + j;
          const float x = i < hi ? v[i] : 0.f;
          const uint32_t k = key_of<NONNEG>(x);
          const bool match = i < hi && k >= bound && ((k - origin) & high) == prefix;
          const unsigned votes = __ballot_sync(0xffffffffu, match);
          if (votes != 0u) {
            const int leader = __ffs(votes) - 1;
            int first = 0;  // the warp's first survivor slot
            if (lane == leader) first = atomicAdd(&h.n_survivors, __popc(votes));
            first = __shfl_sync(0xffffffffu, first, leader);
            const int at = first + __popc(votes & ((1u << lane) - 1u));
            if (match) {
              if (at < kSurvivors) h.survivors[at] = x;
              add_to_bin(x, k);
            }
          }
        }
      } else
#endif
          if ((EMBER_FILTER_SPLIT0 == 1 || (EMBER_FILTER_SPLIT0 == 2 && BY_MASS)) && level == 0 &&
              hi - lo <= 64) {
        // Two phases, so the rare above-the-bound path does not run for nearly every warp step:
        // first the whole segment, branch-free, adds the mass below the bound and marks the
        // values at or above it in a bit mask; then each lane walks only its marked values (a
        // peaked row's warp runs a handful of steps, not one for each of its 32 x 33 values).
        unsigned long long above = 0ull;  // bit j: value lo + j is at or above the bound
#pragma unroll 4
        for (int j = 0; j < hi - lo; ++j) {
          const float x = v[lo + j];
          const uint32_t k = key_of<NONNEG>(x);
          above |= static_cast<unsigned long long>(k >= bound) << j;
          const bool below = k < bound && k >= floor;
          if (EMBER_FILTER_LEAN) {
            rest32 += below ? (BY_MASS ? __float2uint_rz(x * scale) : 1u) : 0u;
          } else {
            rest += below ? (BY_MASS ? fixed_mass(x, scale) : 1ull) : 0ull;
          }
        }
        while (above != 0ull) {
          const int j = __ffsll(static_cast<long long>(above)) - 1;
          above &= above - 1ull;
          const float x = v[lo + j];
          const uint32_t k = key_of<NONNEG>(x);
          add_to_bin(x, k);
        }
      } else if (EMBER_FILTER_LEAN0 && level == 0) {
        // One predicated update a value, no run merging (with the relative digits level 0's
        // values spread over ~128 bins, so runs are short and same-address atomics rare).
        for (int i = lo; i < hi; ++i) {
          const float x = v[i];
          const uint32_t k = key_of<NONNEG>(x);
          if (k >= bound) {
            add_to_bin(x, k);
          } else if (k >= floor) {
            if (EMBER_FILTER_LEAN) {
              rest32 += BY_MASS ? __float2uint_rz(x * scale) : 1u;
            } else {
              rest += BY_MASS ? fixed_mass(x, scale) : 1ull;
            }
          }
        }
      } else {
        // Runs of equal bins in a thread's segment are added once.
        int cur = -1;
        unsigned long long acc = 0;
        for (int i = lo; i < hi; ++i) {
          const float x = v[i];
          const uint32_t k = key_of<NONNEG>(x);
          if (k < bound) {
            if (level == 0 && k >= floor) rest += BY_MASS ? fixed_mass(x, scale) : 1ull;
            continue;
          }
          if (((k - origin) & high) != prefix) continue;
          const int bin = static_cast<int>(((k - origin) >> shift) & digit);
          if (bin != cur) {
            if (acc != 0ull) {
              if (BY_MASS) {
                add_mass(&h.mass_lo[buf][cur], &h.mass_hi[buf][cur], acc);
              } else {
                atomicAdd(&h.cnt[buf][cur], static_cast<unsigned>(acc));
              }
            }
            cur = bin;
            acc = 0;
          }
          acc += BY_MASS ? fixed_mass(x, scale) : 1ull;
        }
        if (acc != 0ull) {
          if (BY_MASS) {
            add_mass(&h.mass_lo[buf][cur], &h.mass_hi[buf][cur], acc);
          } else {
            atomicAdd(&h.cnt[buf][cur], static_cast<unsigned>(acc));
          }
        }
      }
      const bool split = level == 0 && bound != floor;
      if (split) {
        rest += rest32;
#pragma unroll
        for (int o = 16; o > 0; o /= 2) rest += __shfl_xor_sync(0xffffffffu, rest, o);
        if (lane == 0 && rest != 0ull) atomicAdd(&h.rest[buf], rest);  // once per warp
      }
      // NOTE: a one-CTA "cluster" (filter_stream_kernel) takes a block barrier and its own
      // shared memory: cluster.sync() is also a GPU-scope fence and an L1 invalidation, and its
      // wait was the stream's largest stall outside the tile loop (H200, session 12)
      if constexpr (C == 1) {
        __syncthreads();
      } else {
        cluster.sync();
      }
      auto peer = [&cluster](auto* at, int r) {
        if constexpr (C == 1) {
          return at;
        } else {
          return cluster.map_shared_rank(at, r);
        }
      };
      // Thread t < 256 holds bin 255 - t: an inclusive scan over t runs from the largest keys
      // down.
      unsigned long long own = 0, rest_all = 0;
      if (t < kBins) {
        const int bin = kBins - 1 - t;
#pragma unroll
        for (int r = 0; r < C; ++r) {
          if (BY_MASS) {
            const unsigned l = *peer(&h.mass_lo[buf][bin], r);
            const unsigned u = *peer(&h.mass_hi[buf][bin], r);
            own += (static_cast<unsigned long long>(u) << 32) + l;
          } else {
            own += *peer(&h.cnt[buf][bin], r);
          }
          if (split) rest_all += *peer(&h.rest[buf], r);
        }
      }
      unsigned long long incl = own;
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const unsigned long long x = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += x;
      }
      if (t < kBins && lane == 31) h.warp_sum[warp] = incl;
      __syncthreads();
      if (t < kBins) {
        unsigned long long total = 0;
        for (int w = 0; w < kBins / 32; ++w) {
          if (w < warp) incl += h.warp_sum[w];
          total += h.warp_sum[w];
        }
        if (level == 0 && BY_MASS) {  // the target: a share of the total mass, at least 1 unit
          unsigned long long all = total + rest_all;
          if (floor == 0u) all = row_mass > total ? row_mass : total;
          const double goal = ceil(static_cast<double>(ratio) * static_cast<double>(all));
          need = goal < 1.0
                     ? 1ull
                     : (goal >= static_cast<double>(all) ? all
                                                         : static_cast<unsigned long long>(goal));
        }
        if (incl >= need && incl - own < need && own != 0ull) {
          auto& pk = h.pick[buf];
          pk.bin = kBins - 1 - t;
          pk.exact = incl == need;
          pk.above = incl - own;
        }
      }
      __syncthreads();
      const RadixSmem::Pick pk = h.pick[buf];
      if (pk.bin < 0) {  // the answer lies below the cut (level 0 only): start over without it
        if constexpr (CANDIDATES) return 0u;
        retry = true;
        break;
      }
      prefix |= static_cast<uint32_t>(pk.bin) << shift;
      need -= pk.above;
      // (an exact bin ends at its lowest key, which may lie under the cut: keep >= the bound)
      if (pk.exact || level == 3) return origin + prefix > bound ? origin + prefix : bound;
    }
    if (!retry) break;
  }
  return floor;
}

// Sampling, renormalisation and masking under top-k / top-p / min-p filters, one row per
// cluster. The row is loaded once into shared memory (logits: divided by the temperature and
// exponentiated against the row max; probabilities as they are); the thresholds come from
// radix_select; then the one output pass. Rows with NaN (and, for probabilities, negative or
// infinite values; for logits to sample from, +inf) are marked: sample -1, renormalised
// probabilities or masked logits all NaN.
// NOTE: 3 CTAs per SM (40 registers a thread): a 128 256 vocabulary's 64 KB chunks then fit 3 to
// an SM, and 128 rows take 2.6 waves instead of 3.9.
// One row of filter_kernel (below), by every CTA of the cluster in step. Returns with every
// remote read of this CTA's shared memory done; a caller that goes on to another row puts a
// block barrier first (threads may still read the chunk).
template <typename T, bool VEC, int MODE>
__device__ __forceinline__ void filter_row(const FilterParams& p, int64_t row) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) float chunk_smem[];  // [chunk], then 4 exchange slots
  __shared__ float scratch[kSoftmaxThreads / 32];
  __shared__ RadixSmem hist;
  float* exchange = chunk_smem + p.chunk;  // [0] max, [1] bad, [2] block total
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t begin = static_cast<int64_t>(rank) * p.chunk;
  const int n = chunk_length(p.vocab, p.chunk, begin);
  const T* in = static_cast<const T*>(p.in) + row * p.in_row_stride + begin;
  float inv_t = 1.f;
  if constexpr (MODE == kSampleLogits) {
    inv_t = 1.f / (p.temperature != nullptr ? p.temperature[row] : p.scalar_temperature);
  }
  // Non-negative rows (everything but logits to mask: probabilities, and logits to sample from
  // once exponentiated below) take the one-instruction keys under EMBER_FILTER_LEAN.
  constexpr bool kNonneg = EMBER_FILTER_LEAN && MODE != kMaskLogits;
  float mx = -INFINITY;
  bool bad = false;
  load_chunk<T, VEC>(in, n, chunk_smem, [&](float x) {
    if constexpr (MODE == kSampleLogits) x *= inv_t;
    if constexpr (MODE == kMaskLogits) {
      bad |= isnan(x);
    } else if constexpr (MODE == kSampleLogits) {
      bad |= isnan(x) || x == INFINITY;
    } else {
      bad |= !(x >= 0.f && x < INFINITY);
      if constexpr (kNonneg) x += 0.f;  // -0 becomes +0 (its sign bit would misorder the key)
    }
    mx = fmaxf(mx, x);
    return x;
  });
  mx = block_reduce<true>(mx, scratch);
  const float any_bad = block_reduce<true>(bad ? 1.f : 0.f, scratch);
  if (threadIdx.x == 0) {
    exchange[0] = mx;
    exchange[1] = any_bad;
  }
  cluster.sync();
  float row_max = -INFINITY, row_bad = 0.f;
#pragma unroll
  for (int r = 0; r < kSoftmaxCluster; ++r) {
    row_max = fmaxf(row_max, cluster.map_shared_rank(exchange, r)[0]);
    row_bad = fmaxf(row_bad, cluster.map_shared_rank(exchange, r)[1]);
  }
  if (row_bad != 0.f) {
    cluster.sync();  // every remote read of the exchange slots is done
    pdl_launch_dependents();
    if constexpr (MODE == kSampleProbs || MODE == kSampleLogits) {
      if (rank == 0 && threadIdx.x == 0) p.samples[row] = -1;
    } else if constexpr (MODE == kRenormProbs) {
      float* out = static_cast<float*>(p.out) + row * p.out_row_stride + begin;
      for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) out[i] = NAN;
    } else {
      T* out = static_cast<T*>(p.out) + row * p.out_row_stride + begin;
      for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) out[i] = from_float<T>(NAN);
    }
    return;
  }
  // Logits to sample from become exp(x - max) (the largest is 1; a row of -inf has no mass).
  float mass_max = row_max;
  if constexpr (MODE == kSampleLogits) {
    const float m = row_max == -INFINITY ? 0.f : row_max;
    for (int i = threadIdx.x; i < n; i += kSoftmaxThreads)
      chunk_smem[i] = __expf(chunk_smem[i] - m);
    mass_max = row_max == -INFINITY ? 0.f : 1.f;
  }
  // NOTE: an odd segment length puts a warp's 32 lanes on 32 different banks as they walk their
  // segments (an even one, e.g. 32 at vocab 128256, would put them all on one)
  const int seg = ((n + kSoftmaxThreads - 1) / kSoftmaxThreads) | 1;
  const int lo = min(n, static_cast<int>(threadIdx.x) * seg), hi = min(n, lo + seg);
  __syncthreads();  // the exponentials are written by other threads than the segments' owners

  const int k = p.top_k != nullptr ? p.top_k[row] : p.scalar_top_k;
  const bool use_k = k > 0 && k < p.vocab;
  float top_p = 1.f, min_p = 0.f;
  if constexpr (MODE != kMaskLogits) {
    top_p = p.top_p != nullptr ? p.top_p[row] : p.scalar_top_p;
    min_p = p.min_p != nullptr ? p.min_p[row] : p.scalar_min_p;
  }
  const bool has_mass = MODE == kMaskLogits || mass_max > 0.f;
  const bool use_p = MODE != kMaskLogits && top_p < 1.f && has_mass;
  const bool use_min = min_p > 0.f && has_mass;
  const float scale = has_mass ? kMassScale / mass_max : 0.f;
  uint32_t tau = 0;  // keep everything
  int pass = 0;
  // The first histogram covers values >= max * 2^-16 (see radix_select).
  const uint32_t cut =
      MODE != kMaskLogits && has_mass ? order_key(mass_max * 1.52587890625e-05f) : 0u;
  if (use_k) {
    tau = radix_select<false, kNonneg>(cluster, hist, pass, chunk_smem, lo, hi, scale, 0u, cut,
                                       static_cast<unsigned long long>(k), 0.f);
  }
  if constexpr (MODE != kMaskLogits) {
    if (use_p) {
      unsigned long long row_mass = 0;  // without top-k: the row's fp64 sum, in fixed point
      if (tau == 0u) {
        __shared__ double dscratch[kSoftmaxThreads / 32];
        __shared__ double dexchange;
        double mine = 0.0;
        for (int i = lo; i < hi; ++i) mine += static_cast<double>(chunk_smem[i]);
        const double block = block_sum_fixed(mine, dscratch);
        if (threadIdx.x == 0) dexchange = block;
        cluster.sync();
        double sum = 0.0;
#pragma unroll
        for (int r = 0; r < kSoftmaxCluster; ++r) sum += *cluster.map_shared_rank(&dexchange, r);
        row_mass = row_mass_fixed(sum, scale);
        // (the peers' reads of dexchange are behind later cluster barriers of this row, which
        // every CTA passes before it leaves or writes the next row's)
      }
      const uint32_t key_p = radix_select<true, kNonneg>(cluster, hist, pass, chunk_smem, lo, hi,
                                                         scale, tau, cut, 0ull, top_p, row_mass);
      tau = max(tau, key_p);
    }
    if (use_min) tau = max(tau, order_key(fminf(min_p, 1.f) * mass_max));
  }

  if constexpr (MODE == kSampleProbs || MODE == kSampleLogits) {
    sample_chunk<kNonneg>(cluster, chunk_smem, n, lo, hi, tau, row, begin, p.seed, p.offset,
                          p.samples, exchange + 2, scratch);
    pdl_launch_dependents();
  } else if constexpr (MODE == kRenormProbs) {
    float mine = 0.f;
    for (int i = lo; i < hi; ++i) {
      float x = chunk_smem[i];
      if (key_of<kNonneg>(x) < tau) {
        x = 0.f;
        chunk_smem[i] = 0.f;
      }
      mine += x;
    }
    const float total = cluster_reduce<false>(cluster, mine, exchange, 2, scratch);
    cluster.sync();  // every remote read is done: CTAs may leave from here on
    pdl_launch_dependents();
    const float inv = total > 0.f ? 1.f / total : NAN;  // no mass: NaN, like a bad row
    float* out = static_cast<float*>(p.out) + row * p.out_row_stride + begin;
    for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) out[i] = chunk_smem[i] * inv;
  } else {
    cluster.sync();  // every remote read of the histograms is done: CTAs may leave
    pdl_launch_dependents();
    T* out = static_cast<T*>(p.out) + row * p.out_row_stride + begin;
    for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) {
      const float x = chunk_smem[i];
      out[i] = order_key(x) >= tau ? from_float<T>(x) : from_float<T>(-INFINITY);
    }
  }
}

template <typename T, bool VEC, int MODE>
__global__ void __cluster_dims__(kSoftmaxCluster, 1, 1) __launch_bounds__(kSoftmaxThreads, 3)
    filter_kernel(FilterParams p) {
  const int64_t row = blockIdx.x / kSoftmaxCluster;
  pdl_wait();
  if constexpr (MODE == kSampleProbs || MODE == kSampleLogits) {
    if (p.only_marked && p.samples[row] != kStreamFallback) return;  // sampled by the stream
  }
  filter_row<T, VEC, MODE>(p, row);
}

// filter_stream_kernel's fallback: the rows it marked kStreamFallback, each sampled as
// filter_kernel samples it, by a grid of the clusters that fit at once, cluster c taking rows c,
// c + clusters, ... (every CTA of a cluster reads the same flags, so all take the same rows).
// NOTE: filter_kernel over the whole batch, rows x 8 CTAs that nearly all read a flag and leave,
// cost 3.94 us a call when no row fell back (128 rows; H200, session 11).
template <typename T, int MODE>
__global__ void __cluster_dims__(kSoftmaxCluster, 1, 1) __launch_bounds__(kSoftmaxThreads, 3)
    filter_marked_kernel(FilterParams p) {
  static_assert(MODE == kSampleProbs || MODE == kSampleLogits, "only the stream marks rows");
  __shared__ unsigned marked[kSoftmaxThreads / 32];  // bit j of word w: row first + (32w+j)c
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t clusters = gridDim.x / kSoftmaxCluster;
  pdl_wait();
  // NOTE: whether any of this cluster's rows fell back, first: ptxas hoists the row loop's
  // distributed-shared-memory addresses to its preheader, ~220 bytes of local-memory stores a
  // thread, which cost 12 us a launch that found no marked row (H200, 128 rows, session 12)
  bool any = false;
  for (int64_t r = blockIdx.x / kSoftmaxCluster + static_cast<int64_t>(threadIdx.x) * clusters;
       r < p.rows; r += clusters * kSoftmaxThreads) {
    any |= p.samples[r] == kStreamFallback;
  }
  if (__syncthreads_or(any) == 0) return;  // (every CTA of the cluster reads the same flags)
  for (int64_t first = blockIdx.x / kSoftmaxCluster; first < p.rows;
       first += clusters * kSoftmaxThreads) {
    const int64_t mine = first + static_cast<int64_t>(threadIdx.x) * clusters;
    const bool fell_back = mine < p.rows && p.samples[mine] == kStreamFallback;
    const unsigned votes = __ballot_sync(0xffffffffu, fell_back);
    if (lane == 0) marked[warp] = votes;
    __syncthreads();
    for (int w = 0; w < kSoftmaxThreads / 32; ++w) {
      for (unsigned bits = marked[w]; bits != 0u; bits &= bits - 1u) {
        __syncthreads();  // the previous row's threads are done with the chunk
        filter_row<T, true, MODE>(p, first + (32 * w + __ffs(bits) - 1) * clusters);
      }
    }
    __syncthreads();  // every read of `marked` is done before the next flags
  }
  pdl_launch_dependents();
}

// --- sampling from probabilities (or fp32 logits) in one streaming pass ------------------
//
// filter_stream_kernel: one CTA a row (a grid of one CTA an SM, looping over rows) reads the row
// once from global memory in tiles of kStreamPacks 16-byte packs a thread, the next tile's loads
// in flight while it works on the current one, and keeps in shared memory only the candidates:
// the values at or above the running maximum's 2^-16 (the tiles so far, the current one
// included; the row maximum's 2^-16 is filter_kernel's cut, and the running one is never above
// it). A peaked row (softmax of 4 randn over 128 256) keeps ~5 % of its values. It also adds the
// whole row up in fp64 (each thread in its own order, then a fixed tree: the same total on every
// run). The thresholds then come from radix_select over the candidates (the top-p target from
// that total), and the token from sample_candidates. A row the candidates cannot answer (more of
// them than kStreamCap, a top-k or min-p threshold or top-p answer below the cut, no filter at
// all) is marked kStreamFallback and filter_marked_kernel, launched after it, samples it as
// filter_kernel would. The draws: inverse CDF in index order over fixed-point masses, so a
// row's token depends on the row and (seed, offset) only, not on the batch or the order of the
// atomics. From logits (fp32, top-k or min-p: a top-p target alone is a share of the whole row,
// which it does not hold), see the kernel.
constexpr int kStreamCap = 24576;  // candidates a row: 192 KB of values and indices
constexpr int kStreamMinVocab = 32768;

// The token drawn from the candidates whose key is >= tau (all of the row's kept elements),
// each with its fixed-point mass: the index digits, most significant first, each level a
// 256-bin histogram of the kept mass over the next digit of the index among the candidates
// that match the digits chosen so far, scanned in index order for the bin holding the target
// (floor(u * total), u the row's Philox uniform). Integer sums: the same token on every run.
__device__ __forceinline__ int sample_candidates(RadixSmem& h, int& pass, const float* val,
                                                 const int* idx, int n, uint32_t tau, float scale,
                                                 int64_t vocab, float u) {
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % 32, warp = t / 32;
  const int bits = vocab > 1 ? 64 - __clzll(static_cast<unsigned long long>(vocab - 1)) : 1;
  unsigned long long target = 0;
  uint32_t prefix = 0;  // the index digits chosen so far
  int above = bits;     // the shift of the digits chosen so far
  for (int level = 0; above > 0; ++level) {
    const int shift = above > 8 ? above - 8 : 0;
    const uint32_t digit = (1u << (above - shift)) - 1u;
    const int buf = pass++ & 1;
    if (t < kBins) {
      h.mass_lo[buf][t] = 0;
      h.mass_hi[buf][t] = 0;
    }
    if (t == 0) h.pick[buf].bin = -1;
    __syncthreads();
    for (int i = t; i < n; i += static_cast<int>(blockDim.x)) {
      const float x = val[i];
      const uint32_t at = static_cast<uint32_t>(idx[i]);
      if (key_of<true>(x) >= tau && (level == 0 || (at >> above) == prefix)) {
        const int bin = static_cast<int>((at >> shift) & digit);
        add_mass(&h.mass_lo[buf][bin], &h.mass_hi[buf][bin], fixed_mass(x, scale));
      }
    }
    __syncthreads();
    // NOTE: this 64-bit bin scan repeats the one in radix_select on purpose: one shared
    // __forceinline__ helper for both (session 16, `bins_scan`) changed every filter kernel's
    // SASS and measured top_p_renorm_probs 128 x 128 256 at 127.7 / 128.0 us against 126.2 /
    // 126.1 (CUPTI, interleaved; the samplers within noise), so it was taken back.
    // Thread t < 256 holds bin t: an inclusive scan over t runs up the indices.
    unsigned long long own = 0;
    if (t < kBins)
      own = (static_cast<unsigned long long>(h.mass_hi[buf][t]) << 32) + h.mass_lo[buf][t];
    unsigned long long incl = own;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const unsigned long long x = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += x;
    }
    if (t < kBins && lane == 31) h.warp_sum[warp] = incl;
    __syncthreads();
    if (t < kBins) {
      unsigned long long total = 0;
      for (int w = 0; w < kBins / 32; ++w) {
        if (w < warp) incl += h.warp_sum[w];
        total += h.warp_sum[w];
      }
      // floor(u * total) < total: u has 24 bits
      if (level == 0) {
        target = __umul64hi(total, static_cast<unsigned long long>(u * 16777216.f) << 40);
      }
      if (own != 0ull && incl > target && incl - own <= target) {
        h.pick[buf].bin = t;
        h.pick[buf].above = incl - own;
      }
    }
    __syncthreads();
    const RadixSmem::Pick pk = h.pick[buf];
    if (pk.bin < 0) return -1;  // no mass kept (not reached: the maximum is always kept)
    target -= pk.above;         // (only threads < 256 use it; each computed the same)
    prefix = (prefix << (above - shift)) | static_cast<uint32_t>(pk.bin);
    above = shift;
  }
  return static_cast<int>(prefix);
}

// NOTE: 1024 threads of 4 packs a tile (64 registers), not 512 of 8 (124 registers): the
// per-value work is dependent chains, and twice the warps hide them (H200, 128 x 128 256 top-p:
// 53.41 against 60.03 us, IPC 2.2 against 1.4; session 11).
constexpr int kStreamThreads = 1024;
// EMBER_STREAM_LEAN, bits (A/B, session 12): 1 = the running maximum through one warp
// reduction (REDUX) and one shared atomic max a warp a tile, where every thread read the 32 warp
// maxima (40 instructions a tile); 2 = negative values found by OR-ing the values' sign bits (the
// row then goes to the cluster kernel, which tells -0 from a negative value) instead of a running
// minimum. 0: the session 11 forms. EMBER_STREAM_CHAINS: the fp64 sums a thread keeps.
#ifndef EMBER_STREAM_LEAN
#define EMBER_STREAM_LEAN 3
#endif
#ifndef EMBER_STREAM_CHAINS
#define EMBER_STREAM_CHAINS 1
#endif
#ifndef EMBER_STREAM_KEPT
#define EMBER_STREAM_KEPT 1  // NOTE: 0 = the draw's levels walk the whole candidate list (A/B)
#endif
template <int MODE>
__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(kStreamThreads, 1)
    filter_stream_kernel(FilterParams p) {
  constexpr int kStreamPacks = 4;  // a thread's 16-byte packs a tile (two tiles' in flight)
  static_assert(MODE == kSampleProbs || MODE == kSampleLogits, "the streaming pass samples");
  // Logits (fp32), x the value times 1 / temperature: the candidates are the values whose x is
  // within 11.25 (more than 16 ln 2) of the running maximum, found on the raw values (scaling
  // by a positive number keeps the order: the row's maximum x is its maximum value's), kept as
  // they are, and become exp(x - max) (filter_kernel's masses, bit for bit) once the row's
  // maximum is known. (Scaling each value in the loop made ptxas spill.)
  constexpr bool kLogits = MODE == kSampleLogits;
  constexpr bool kRedux = kLogits || (EMBER_STREAM_LEAN & 1) != 0;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) float cand_val[];  // [kStreamCap] values, [kStreamCap] indices
  int* cand_idx = reinterpret_cast<int*>(cand_val + kStreamCap);
  __shared__ float tile_max[2][kStreamThreads / 32];
  // LEAN: [tile & 1]: the bits of the row's maximum through this tile, each warp's atomic max
  // of its tile maximum and the running maximum through the tile before
  __shared__ unsigned max_bits[2];
  __shared__ double part[kStreamThreads / 32];
  __shared__ int n_cand, n_kept;
  __shared__ RadixSmem hist;
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % 32, warp = t / 32;
  constexpr int kTile = kStreamPacks * kStreamThreads;  // packs a tile
  const int packs = static_cast<int>(p.vocab / 4);
  const int tiles = (packs + kTile - 1) / kTile;
  int pass = 0;
  if (kRedux && t == 0) max_bits[0] = max_bits[1] = 0u;  // (reset again each row)
  __syncthreads();
  pdl_wait();
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const float4* src =
        reinterpret_cast<const float4*>(static_cast<const float*>(p.in) + row * p.in_row_stride);
    if (t == 0) n_cand = 0;         // (every read of the previous row's count is behind a barrier)
    float inv_t = 1.f, span = 0.f;  // logits: 11.25 in x, in raw units
    if constexpr (kLogits) {
      inv_t = 1.f / (p.temperature != nullptr ? p.temperature[row] : p.scalar_temperature);
      span = 11.25f / inv_t;
    }
    constexpr float kPad = kLogits ? -INFINITY : 0.f;  // past the row: never a candidate
    float4 cur[kStreamPacks], nxt[kStreamPacks];
    auto issue = [&](float4(&dst)[kStreamPacks], int tile) {
#pragma unroll
      for (int u = 0; u < kStreamPacks; ++u) {
        const int i = tile * kTile + u * kStreamThreads + t;
        dst[u] = i < packs ? src[i] : make_float4(kPad, kPad, kPad, kPad);
      }
    };
    issue(cur, 0);
    float run_max = kLogits ? -INFINITY : 0.f;
    float run_min = 0.f;  // < 0: a negative value (NaN and inf show in the sum)
    uint32_t signs = 0u;  // LEAN: the OR of the values' bits (a sign: a negative value, or -0)
    constexpr int kChains = EMBER_STREAM_CHAINS;  // (4 spill a pack a tile under 64 registers)
    double sum[kChains] = {};                     // each value in fp64 (see below)
    for (int tile = 0; tile < tiles; ++tile) {
      if (tile + 1 < tiles) issue(nxt, tile + 1);
      float m = kLogits ? -INFINITY : 0.f;
#pragma unroll
      for (int u = 0; u < kStreamPacks; ++u) {
        if constexpr (kLogits) {
          // a NaN propagates (the row is then bad; +inf shows in the maximum too)
          m = fmax_nan(fmax_nan(m, fmax_nan(cur[u].x, cur[u].y)), fmax_nan(cur[u].z, cur[u].w));
          continue;
        }
        m = fmaxf(fmaxf(m, fmaxf(cur[u].x, cur[u].y)), fmaxf(cur[u].z, cur[u].w));
        if (EMBER_STREAM_LEAN & 2) {
          signs |= __float_as_uint(cur[u].x) | __float_as_uint(cur[u].y) |
                   __float_as_uint(cur[u].z) | __float_as_uint(cur[u].w);
        } else {
          run_min = fminf(fminf(run_min, fminf(cur[u].x, cur[u].y)), fminf(cur[u].z, cur[u].w));
        }
        // NOTE: each value in fp64: an fp32 pair sum would round the maximum's pack by ~2^16
        // fixed-point units, enough to move a top-p target against the other paths'
        sum[0] += static_cast<double>(cur[u].x);
        sum[1 % kChains] += static_cast<double>(cur[u].y);
        sum[2 % kChains] += static_cast<double>(cur[u].z);
        sum[3 % kChains] += static_cast<double>(cur[u].w);
      }
      if constexpr (kLogits) {
        // order_key bits (a NaN of either sign made the largest), the same word protocol
        const unsigned wm = __reduce_max_sync(0xffffffffu, isnan(m) ? ~0u : order_key(m));
        if (lane == 0) atomicMax(&max_bits[tile & 1], max(wm, order_key(run_max)));
        __syncthreads();  // (also orders the reset of n_cand before the first tile's appends)
        run_max = from_order_key(max_bits[tile & 1]);
      } else if (EMBER_STREAM_LEAN & 1) {
        // m >= 0 (from 0, fmaxf drops NaN): its bits order as the values; the sign bit is
        // cleared for a -0. The word [tile & 1] was last read before the previous barrier.
        const unsigned wm = __reduce_max_sync(0xffffffffu, __float_as_uint(m) & 0x7fffffffu);
        if (lane == 0) atomicMax(&max_bits[tile & 1], max(wm, __float_as_uint(run_max)));
        __syncthreads();  // (also orders the reset of n_cand before the first tile's appends)
        run_max = __uint_as_float(max_bits[tile & 1]);
      } else {
#pragma unroll
        for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) tile_max[tile & 1][warp] = m;
        __syncthreads();  // (also orders the reset of n_cand before the first tile's appends)
        // NOTE: every thread reads the 32 warp maxima; lane w reading warp w's and a butterfly
        // (11 instructions, not 40) made ptxas spill in this loop: 54.2 against 49.1 us (H200,
        // 128 x 128 256 top-p, session 12)
#pragma unroll
        for (int w = 0; w < kStreamThreads / 32; ++w) {
          run_max = fmaxf(run_max, tile_max[tile & 1][w]);
        }
      }
      // NOTE: the smallest positive float as the floor, so zeros never become candidates
      float cutv = fmaxf(run_max * 1.52587890625e-05f, 1.401298464e-45f);
      if constexpr (kLogits) {
        // exp(x - max) >= 2^-16 needs x >= max - 11.09; the slack (11.25, and 2^-20 of the
        // maximum) covers the scaling's, __expf's and the subtraction's rounding; -FLT_MAX as
        // the floor: -inf (no mass) is never a candidate
        cutv = fmaxf(run_max - (span + fabsf(run_max) * 9.5367431640625e-07f), -3.402823466e38f);
      }
      int c = 0;
#pragma unroll
      for (int u = 0; u < kStreamPacks; ++u) {
        c += (cur[u].x >= cutv) + (cur[u].y >= cutv) + (cur[u].z >= cutv) + (cur[u].w >= cutv);
      }
      int incl = c;  // the warp's inclusive scan of the counts: each lane's slots
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const int x = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += x;
      }
      const int warp_total = __shfl_sync(0xffffffffu, incl, 31);
      if (warp_total != 0) {
        int base = 0;
        if (lane == 31) base = atomicAdd(&n_cand, warp_total);
        base = __shfl_sync(0xffffffffu, base, 31);
        int at = base + incl - c;
        // Predicated stores, no branch a value (a peaked row's warp has a few candidates in
        // nearly every tile); the capacity test only where the warp's slots cross it.
        auto append = [&](bool guard) {
#pragma unroll
          for (int u = 0; u < kStreamPacks; ++u) {
            const float v[4] = {cur[u].x, cur[u].y, cur[u].z, cur[u].w};
            const int first = (tile * kTile + u * kStreamThreads + t) * 4;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              if (v[j] >= cutv && (!guard || at < kStreamCap)) {
                cand_val[at] = v[j];
                cand_idx[at] = first + j;
              }
              at += v[j] >= cutv ? 1 : 0;
            }
          }
        };
        if (base + warp_total <= kStreamCap) {
          append(false);
        } else {
          append(true);
        }
      }
#pragma unroll
      for (int u = 0; u < kStreamPacks; ++u) cur[u] = nxt[u];
    }
    int32_t token = kStreamFallback;
    int n;
    float row_max;
    double total = 0.0;
    bool answer;  // the candidates may answer the row
    if constexpr (kLogits) {
      __syncthreads();  // publishes the candidates
      n = n_cand;
      row_max = 1.f;  // the masses: exp(x - max), the largest 1
      answer = false;
      const float x_max = __fmul_rn(run_max, inv_t);  // (no contraction: filter_kernel's x)
      if (!(x_max < INFINITY) || x_max == -INFINITY) {
        token = -1;  // a NaN or +inf (filter_kernel's bad rows), or all -inf (no mass)
      } else if (n <= kStreamCap) {
        for (int i = t; i < n; i += kStreamThreads) {
          cand_val[i] = __expf(__fmul_rn(cand_val[i], inv_t) - x_max);
        }
        __syncthreads();
        answer = true;
      }
    } else {
      double row_sum = sum[0];
#pragma unroll
      for (int i = 1; i < kChains; ++i) row_sum += sum[i];
      const bool bad = (EMBER_STREAM_LEAN & 2) ? (signs >> 31) != 0u : run_min < 0.f;
      // The row's total in a fixed order: lane 0's butterfly sum a warp, then the warps in turn.
#pragma unroll
      for (int o = 16; o > 0; o /= 2) row_sum += __shfl_xor_sync(0xffffffffu, row_sum, o);
      if (lane == 0) part[warp] = row_sum;
      const bool negative = __syncthreads_or(bad) != 0;  // also publishes part and the candidates
#pragma unroll
      for (int w = 0; w < kStreamThreads / 32; ++w) total += part[w];
      // a NaN or an infinity makes the fp64 sum NaN or infinite (finite fp32 values cannot)
      const bool row_bad = (!(EMBER_STREAM_LEAN & 2) && negative) || !isfinite(total);
      n = n_cand;
      row_max = run_max;
      if ((EMBER_STREAM_LEAN & 2) && negative && !row_bad) {
        // a sign bit: a negative value (a bad row) or a -0 (a zero): filter_kernel tells them apart
        answer = false;
      } else if (row_bad || !(row_max > 0.f)) {
        token = -1;  // NaN, infinite or negative values, or no mass (filter_kernel's -1 rows)
        answer = false;
      } else {
        answer = n <= kStreamCap;
      }
    }
    if (answer) {
      const int k = p.top_k != nullptr ? p.top_k[row] : p.scalar_top_k;
      const bool use_k = k > 0 && k < p.vocab;
      const float top_p = p.top_p != nullptr ? p.top_p[row] : p.scalar_top_p;
      const float min_p = p.min_p != nullptr ? p.min_p[row] : p.scalar_min_p;
      const bool use_p = top_p < 1.f;
      const float scale = kMassScale / row_max;
      const uint32_t cut = order_key(row_max * 1.52587890625e-05f);
      const int seg = ((n + kStreamThreads - 1) / kStreamThreads) | 1;
      const int lo = min(n, t * seg), hi = min(n, lo + seg);
      uint32_t tau = 0;
      // logits: a top-p target without top-k is a share of the whole row's mass, which the
      // candidates do not hold (filter_kernel takes the row)
      bool ok = !(kLogits && use_p && !use_k);
      if (use_k) {
        tau = radix_select<false, true, 1, true>(cluster, hist, pass, cand_val, lo, hi, scale, 0u,
                                                 cut, static_cast<unsigned long long>(k), 0.f);
        ok = tau >= cut;  // 0: fewer than k candidates at or above the cut
      }
      if (ok && use_p) {
        const uint32_t key_p =
            radix_select<true, true, 1, true>(cluster, hist, pass, cand_val, lo, hi, scale, tau,
                                              cut, 0ull, top_p, row_mass_fixed(total, scale));
        ok = key_p != 0u;
        tau = max(tau, key_p);
      }
      if (min_p > 0.f) tau = max(tau, order_key(fminf(min_p, 1.f) * row_max));
      if (ok && tau >= cut) {
        const float u = uniform01(p.seed, p.offset, static_cast<uint64_t>(row));
        const float* val = cand_val;
        const int* idx = cand_idx;
        int m = n;
        if constexpr (EMBER_STREAM_KEPT != 0) {
          // The kept candidates (key >= tau) copied after the list, one warp vote a step, so
          // the draw's levels walk them instead of the whole list (the same set: the same token)
          if (t == 0) n_kept = 0;
          __syncthreads();
          for (int first = 0; first < n; first += kStreamThreads) {
            const int i = first + t;
            const bool keep = i < n && key_of<true>(cand_val[i]) >= tau;
            const unsigned votes = __ballot_sync(0xffffffffu, keep);
            int base = 0;
            if (lane == 0 && votes != 0u) base = atomicAdd(&n_kept, __popc(votes));
            base = n + __shfl_sync(0xffffffffu, base, 0) + __popc(votes & ((1u << lane) - 1u));
            if (keep && base < kStreamCap) {
              cand_val[base] = cand_val[i];
              cand_idx[base] = cand_idx[i];
            }
          }
          __syncthreads();
          if (n + n_kept <= kStreamCap) {  // (else the copy was cut short: the whole list)
            val = cand_val + n;
            idx = cand_idx + n;
            m = n_kept;
          }
        }
        token = sample_candidates(hist, pass, val, idx, m, tau, scale, p.vocab, u);
      }
    }
    if (t == 0) {
      p.samples[row] = token;
      if (kRedux) max_bits[0] = max_bits[1] = 0u;  // (last read in the tile loop)
    }
    __syncthreads();  // the candidates and n_cand are read no more before the next row's
  }
  pdl_launch_dependents();
}

#ifndef EMBER_FILTER_STREAM
#define EMBER_FILTER_STREAM 1  // NOTE: 0 = filter_kernel for every row (A/B)
#endif
// NOTE: EMBER_FILTER_MARKED: the rows of the batch a cluster of filter_marked_kernel takes at
// least (its grid is rows / this, at most what fits; 8: 48.90 against 47.77 us, session 12);
// 0 = the stream's fallback is filter_kernel over all rows (A/B)
#ifndef EMBER_FILTER_MARKED
#define EMBER_FILTER_MARKED 1
#endif
// NOTE: one CTA a row is bound by the SM's issue rate, ~42 us a row however few rows there are;
// the cluster kernel spreads a row over 8 SMs: 26.6 us for 1 row, 41.6 for 32, 72.9 for 64
// (stream: 42.1, 47.0, 48.96; H200, session 11). From 48 rows the stream is faster.
constexpr int kStreamMinRows = 48;

template <typename T, int MODE>
cudaError_t launch_filter(const FilterParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.vocab == 0) return cudaSuccess;
  const size_t smem = (static_cast<size_t>(p.chunk) + 4) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(p.rows * kSoftmaxCluster));
  constexpr bool kStreams =
      MODE == kSampleProbs || (MODE == kSampleLogits && std::is_same_v<T, float>);
  if constexpr (kStreams && EMBER_FILTER_STREAM != 0 && EMBER_FILTER_LEAN != 0) {
    // Only where a filter can keep the answer among the candidates (not plain sampling; from
    // logits, not top-p alone: its target is a share of the whole row). Both kernels keep
    // exactly the same set; their draws differ only where the target falls within the cluster
    // kernel's fp32 rounding of a token's edge (its running sums are fp32; the stream's are
    // integers), so a row's token depends on its batch's size only there.
    const bool top_k = p.top_k != nullptr || (p.scalar_top_k > 0 && p.scalar_top_k < p.vocab);
    const bool min_p = p.min_p != nullptr || p.scalar_min_p > 0.f;
    const bool top_p = p.top_p != nullptr || p.scalar_top_p < 1.f;
    const bool filtered = top_k || min_p || (MODE == kSampleProbs && top_p);
    const int sms = stream_grid(p.device);
    if (p.vec && p.vocab >= kStreamMinVocab && p.rows >= kStreamMinRows && filtered && sms > 0) {
      const unsigned blocks = static_cast<unsigned>(p.rows < sms ? p.rows : sms);
      const size_t stream_smem = static_cast<size_t>(kStreamCap) * 8;
      if (const cudaError_t err = launch_kernel<filter_stream_kernel<MODE>>(
              dim3(blocks), dim3(kStreamThreads), stream_smem, stream, p.pdl, p.device, p);
          err != cudaSuccess) {
        return err;
      }
      FilterParams q = p;
      q.only_marked = true;
      if constexpr (EMBER_FILTER_MARKED != 0) {
        constexpr auto marked = filter_marked_kernel<T, MODE>;
        const int clusters = resident_clusters<marked, kSoftmaxCluster>(p.device, p.chunk, smem);
        if (clusters > 0) {
          const int64_t want = (p.rows + EMBER_FILTER_MARKED - 1) / EMBER_FILTER_MARKED;
          const int64_t used = want < clusters ? want : clusters;
          return launch_kernel<marked>(dim3(static_cast<unsigned>(used * kSoftmaxCluster)),
                                       dim3(kSoftmaxThreads), smem, stream, p.pdl, p.device, q);
        }
      }
      return launch_kernel<filter_kernel<T, true, MODE>>(grid, dim3(kSoftmaxThreads), smem, stream,
                                                         p.pdl, p.device, q);
    }
  }
  if (p.vec) {
    return launch_kernel<filter_kernel<T, true, MODE>>(grid, dim3(kSoftmaxThreads), smem, stream,
                                                       p.pdl, p.device, p);
  }
  return launch_kernel<filter_kernel<T, false, MODE>>(grid, dim3(kSoftmaxThreads), smem, stream,
                                                      p.pdl, p.device, p);
}

}  // namespace sampling
}  // namespace ember

#pragma nv_diagnostic pop
