// Softmax with temperature (sm_90+; the family's shared pieces are in sampling.cuh). Each CTA
// loads its chunk of a row (as fp32, divided by the row's temperature) while it gathers the chunk's
// maximum and its sum of exponentials against a running maximum (the online form); the CTAs
// exchange their (max, sum) pairs once; then each CTA writes its chunk of probabilities.
// (EMBER_SOFTMAX_ONLINE=0: the maxima, then the sums of exponentials, in two exchanges.) The
// logits are read once and the probabilities written once: no second pass over a row that does
// not fit in L2. Which kernel takes a shape: launch_softmax, at the end.
#pragma once

#include "ember/async_copy.cuh"
#include "ember/sampling.cuh"

// A declaration that hides another is an error in ember's device code (tests/jit/test_hiding.py).
#pragma nv_diagnostic push
#pragma nv_diag_error 1348

namespace ember {
namespace sampling {

// The cluster-wide half of a softmax over a row whose CTA chunks (n values each, already scaled)
// sit in row_smem, `mx` this thread's running maximum: the CTAs' maxima go through exchange[0],
// each chunk becomes exp(x - max) in place, the sums go through exchange[1]; returns 1 / the
// row's sum. Two cluster barriers; the caller's last read of a peer's slots is behind the second.
template <int C>
__device__ __forceinline__ float exp_and_normalizer(cooperative_groups::cluster_group& cluster,
                                                    float* row_smem, int n, float mx,
                                                    float* exchange, float* scratch) {
  // (the block reduction's barrier also publishes row_smem)
  const float m = cluster_reduce<true, C>(cluster, mx, exchange, 0, scratch);
  float sum = 0.f;
  for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) {
    const float e = __expf(row_smem[i] - m);
    row_smem[i] = e;
    sum += e;
  }
  return 1.f / cluster_reduce<false, C>(cluster, sum, exchange, 1, scratch);
}

#ifndef EMBER_SOFTMAX_ONLINE
#define EMBER_SOFTMAX_ONLINE 1  // NOTE: 0 = two cluster exchanges a row (max, then sum; A/B)
#endif
constexpr float kLog2e = 1.4426950408889634f;

// What a thread gathers from the values it loads: their maximum and, with the online form, the
// sum of 2^(x - max) so far (x in log2 units, rescaled when the maximum grows; -inf adds 0, a NaN
// or +inf makes the sum NaN, as the two-exchange form does).
template <bool ONLINE = EMBER_SOFTMAX_ONLINE>
struct RowStats {
  float m = -INFINITY;
  float s = 0.f;
  __device__ __forceinline__ void add(float x) {
    if (ONLINE) {
      if (x > m) {
        s *= exp2_approx(m - x);
        m = x;
      }
      s += x == -INFINITY ? 0.f : exp2_approx(x - m);
    } else {
      m = fmaxf(m, x);
    }
  }
};

// The online form's cluster-wide half: the threads' (max, sum) pairs combine into the CTA's, which
// go through slots[0..1]; returns {base, 1 / the row's sum}, a probability being
// 2^(x - base) * inv. One cluster barrier, after which the caller may arrive (its reads of the
// peers' slots are done) and wait only at exit. A row of all -inf gives base 0 and a sum of 0
// (NaN probabilities, as documented).
template <int C, bool ONLINE>
__device__ __forceinline__ float2 online_normalizer(cooperative_groups::cluster_group& cluster,
                                                    RowStats<ONLINE> st, float* slots,
                                                    float* scratch) {
  const float m = block_reduce<true>(st.m, scratch);  // (its barrier also publishes row_smem)
  const float s =
      block_reduce<false>(st.m == -INFINITY ? 0.f : st.s * exp2_approx(st.m - m), scratch);
  if (threadIdx.x == 0) {
    slots[0] = m;
    slots[1] = s;
  }
  cluster.sync();
  float gm = -INFINITY;
#pragma unroll
  for (int r = 0; r < C; ++r) gm = fmaxf(gm, cluster.map_shared_rank(slots, r)[0]);
  const float base = gm == -INFINITY ? 0.f : gm;
  float gs = 0.f;
#pragma unroll
  for (int r = 0; r < C; ++r) {
    const float* q = cluster.map_shared_rank(slots, r);
    gs += q[0] == -INFINITY ? 0.f : q[1] * exp2_approx(q[0] - base);
  }
  return make_float2(base, 1.f / gs);
}

// NOTE: measured (session 16, 128 x 128 256 fp32, CUPTI, same run as a 40.96 / 41.02 default):
// evict-first loads and stores (ld/st.global.cs) 41.15, stores alone 40.99, non-coherent loads
// with 256-byte L2 fetches 41.63 — no cache hint helps this stream.
// The store pass over a CTA's chunk: 2^(x - base) * inv for the online form, else x * inv (the
// chunk already holds exp(x - max)).
__device__ __forceinline__ void store_probs(float* out, const float* row_smem, int n, float base,
                                            float inv) {
  for (int i = threadIdx.x; i < n; i += kSoftmaxThreads) {
    out[i] = EMBER_SOFTMAX_ONLINE ? exp2_approx(row_smem[i] - base) * inv : row_smem[i] * inv;
  }
}

template <typename T, bool VEC>
__global__ void __cluster_dims__(kSoftmaxCluster, 1, 1) __launch_bounds__(kSoftmaxThreads)
    softmax_kernel(SoftmaxParams p) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) float row_smem[];  // [chunk] values, then 2 exchange slots
  __shared__ float scratch[kSoftmaxThreads / 32];
  float* exchange = row_smem + p.chunk;  // [0]: this CTA's max, [1]: its sum
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / kSoftmaxCluster;
  const int64_t begin = static_cast<int64_t>(rank) * p.chunk;
  const int n = chunk_length(p.vocab, p.chunk, begin);
  const T* in = static_cast<const T*>(p.logits) + row * p.logits_row_stride + begin;
  pdl_wait();
  const float t = p.temperature != nullptr ? p.temperature[row] : p.scalar_temperature;
  const float scale = (EMBER_SOFTMAX_ONLINE ? kLog2e : 1.f) / t;
  RowStats<> st;
  load_chunk<T, VEC>(in, n, row_smem, [&](float x) {
    x *= scale;
    st.add(x);
    return x;
  });
  float* out = p.probs + row * p.probs_row_stride + begin;
  if (EMBER_SOFTMAX_ONLINE) {
    const float2 nz = online_normalizer<kSoftmaxCluster>(cluster, st, exchange, scratch);
    auto token = cluster.barrier_arrive();  // this CTA's reads of its peers' slots are done
    pdl_launch_dependents();
    store_probs(out, row_smem, n, nz.x, nz.y);
    cluster.barrier_wait(std::move(token));  // no CTA leaves while another reads its slots
  } else {
    const float inv_s =
        exp_and_normalizer<kSoftmaxCluster>(cluster, row_smem, n, st.m, exchange, scratch);
    cluster.sync();  // no CTA leaves while another still reads its exchange slots
    pdl_launch_dependents();
    store_probs(out, row_smem, n, 0.f, inv_s);
  }
}

#ifndef EMBER_SOFTMAX_PERSISTENT
#define EMBER_SOFTMAX_PERSISTENT 1  // NOTE: 0 = softmax_kernel on every shape (A/B)
#endif
// The chunks softmax_persistent_kernel takes: from just above the largest chunk with which
// softmax_kernel still fits 4 CTAs an SM (56 KB of shared memory each; below it the persistent
// kernel's cap of 2 lost: 512 x 32 000 fp32, 77.98 against 72.10 us on the H200), up to a row of
// 131 072 elements, whose next chunk is held in 8 (fp32) or 4 (16-bit) 16-byte registers a
// thread (128 x 128 256 fp32: 47.71 against 51.01 us).
constexpr int kPersistentMinChunk = 14336;
constexpr int kPersistentMaxChunk = 16384;

// The loads of a row's chunk into the registers `next`: thread t's packs t, t + kSoftmaxThreads,
// ... of the first `packs` from `chunk` (16-byte aligned), in flight until stage_chunk uses them.
template <typename T, int kE, int kPacks>
__device__ __forceinline__ void fetch_chunk(Vec<T, kE> (&next)[kPacks], const T* chunk, int packs,
                                            int t) {
  const Vec<T, kE>* src = reinterpret_cast<const Vec<T, kE>*>(chunk);
#pragma unroll
  for (int u = 0; u < kPacks; ++u) {
    if (t + u * kSoftmaxThreads < packs) next[u] = src[t + u * kSoftmaxThreads];
  }
}

// A row's chunk from the registers `next` (the packs of thread t: t, t + kSoftmaxThreads, ...,
// the first `packs` of the chunk) into row_smem as fp32 times `scale`, gathering the thread's
// online statistics `st` (softmax_persistent_kernel, softmax_grid_kernel).
template <typename T, int kE, int kPacks>
__device__ __forceinline__ void stage_chunk(const Vec<T, kE> (&next)[kPacks], float* row_smem,
                                            int packs, float scale, RowStats<>& st, int t) {
#pragma unroll
  for (int u = 0; u < kPacks; ++u) {
    const int i = t + u * kSoftmaxThreads;
    if (i < packs) {
      float v[kE];
#pragma unroll
      for (int j = 0; j < kE; ++j) {
        v[j] = to_float(next[u].v[j]) * scale;
        st.add(v[j]);
      }
#pragma unroll
      for (int j = 0; j < kE; j += 4) {
        *reinterpret_cast<float4*>(row_smem + i * kE + j) =
            make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
      }
    }
  }
}

// A persistent CTA's chunk of each of its rows (chunk `rank`), the next row's loads held in
// registers until they are staged (softmax_persistent_kernel, softmax_grid_kernel).
template <typename T>
struct ChunkPrefetch {
  static constexpr int kE = 16 / static_cast<int>(sizeof(T));
  static constexpr int kPacks = kPersistentMaxChunk / kE / kSoftmaxThreads;
  const SoftmaxParams& p;
  const int64_t begin;  // the chunk's first element in a row
  const int n;          // its length
  const int packs;      // the vector path: n is a multiple of kE
  const int t;
  Vec<T, kE> next[kPacks];
  __device__ __forceinline__ ChunkPrefetch(const SoftmaxParams& params, int rank)
      : p(params),
        begin(static_cast<int64_t>(rank) * params.chunk),
        n(chunk_length(params.vocab, params.chunk, begin)),
        packs(n / kE),
        t(static_cast<int>(threadIdx.x)) {}
  // Row `row`'s chunk: the loads issued, in flight until stage.
  __device__ __forceinline__ void issue(int64_t row) {
    fetch_chunk(next, static_cast<const T*>(p.logits) + row * p.logits_row_stride + begin, packs,
                t);
  }
  // The issued row into row_smem as fp32 times `scale`, its online statistics into `st`.
  __device__ __forceinline__ void stage(float* row_smem, float scale, RowStats<>& st) {
    stage_chunk(next, row_smem, packs, scale, st, t);
  }
};

// softmax_kernel on more rows than its clusters can hold at once (128 rows of 128 256 fp32 take
// 2.6 waves of 3 CTAs an SM whose load, reduce and store phases run in lockstep, memory idle
// while a wave reduces). Here a cluster loops over rows r, r + clusters, ...; while it reduces
// and stores row r, the loads of its next row are in flight into registers, then go to shared
// memory at the top of the next iteration. Registers cap it at 2 CTAs an SM; the grid is what
// fits at once (cudaOccupancyMaxActiveClusters), so every cluster stays resident.
template <typename T, int C = kSoftmaxCluster>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(kSoftmaxThreads, 2)
    softmax_persistent_kernel(SoftmaxParams p) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) float row_smem[];  // [chunk] values, then 4 exchange slots
  __shared__ float scratch[kSoftmaxThreads / 32];
  float* exchange = row_smem + p.chunk;  // [0]: this CTA's max, [1]: its sum (online: [2..3] too)
  const int64_t clusters = gridDim.x / C;
  ChunkPrefetch<T> chunk(p, static_cast<int>(cluster.block_rank()));
  int64_t row = blockIdx.x / C;
  pdl_wait();
  if (row < p.rows) chunk.issue(row);
  for (int iter = 0; row < p.rows; row += clusters, ++iter) {
    const float t_row = p.temperature != nullptr ? p.temperature[row] : p.scalar_temperature;
    const float scale = (EMBER_SOFTMAX_ONLINE ? kLog2e : 1.f) / t_row;
    RowStats<> st;
    __syncthreads();  // the previous row's store pass is done reading row_smem
    chunk.stage(row_smem, scale, st);
    if (row + clusters < p.rows) chunk.issue(row + clusters);  // in flight while this row finishes
    float* out = p.probs + row * p.probs_row_stride + chunk.begin;
    const int n = chunk.n;
    if (EMBER_SOFTMAX_ONLINE) {
      // NOTE: one cluster barrier a row, so the slots alternate: row k + 2 writes row k's pair
      // only after row k + 1's barrier, which every CTA passes after its reads of row k's.
      const float2 nz = online_normalizer<C>(cluster, st, exchange + 2 * (iter & 1), scratch);
      store_probs(out, row_smem, n, nz.x, nz.y);
    } else {
      // NOTE: the exchange slots need no barrier of their own between rows: a CTA writes slot 0
      // (1) of row k + 1 only after every CTA has passed row k's second (row k + 1's first)
      // cluster barrier, and every read of row k's slot 0 (1) comes before that barrier.
      store_probs(out, row_smem, n, 0.f,
                  exp_and_normalizer<C>(cluster, row_smem, n, st.m, exchange, scratch));
    }
  }
  cluster.sync();  // no CTA leaves while another still reads its exchange slots
  pdl_launch_dependents();
}

// Rows softmax_persistent_kernel would take (48 or more whose 8 chunks are 14 337-16 384
// elements) go to softmax_grid_kernel: the same 8 chunks a row and 2 CTAs an SM but no
// thread-block clusters, a persistent cooperative grid whose CTAs 8r..8r+7 share rows and
// exchange their (max, sum) through global memory. Why: GPC quantisation lets only 30 8-CTA
// clusters (240 CTAs) run at once on the H200, so 128 rows take 5 rounds; a clusterless grid
// runs 264 CTAs = 33 rows a round, 128 rows in 4. Measured (session 14, CUPTI, against the
// cluster kernel in the same call): 128 x 128 256 fp32 42.3 -> 40.7 us, bf16 38.1 -> 37.0; 96
// rows fp32 34.4 -> 31.7; 64 rows fp32 25.2 -> 22.8, bf16 22.4 -> 20.4 (predicted 34-36 us at
// 128 rows: the exchange costs more than the cluster barrier did; notes/act.md, "Session 14").
// 16-bit logits take softmax_reg_kernel instead (the same grid and exchange; EMBER_SOFTMAX_REG).
// EMBER_SOFTMAX_GRID=0 keeps the cluster kernel for these rows (A/B).
#ifndef EMBER_SOFTMAX_GRID
#define EMBER_SOFTMAX_GRID 1
#endif
// Below this many rows one round of 8-CTA clusters holds them all: nothing to balance.
constexpr int64_t kGridMinRows = 48;

// The workspace softmax_grid_kernel takes for `rows` rows of `vocab` (32-bit words, any contents;
// 0: it does not take these rows): an arrival count a row (padded to an even count), then a
// (max, sum) pair a row and chunk.
inline int64_t grid_workspace_words(int64_t rows, int64_t vocab) {
  if (!EMBER_SOFTMAX_GRID || !EMBER_SOFTMAX_ONLINE || rows < kGridMinRows) return 0;
  const int64_t chunk = ((vocab + kSoftmaxCluster - 1) / kSoftmaxCluster + 7) / 8 * 8;
  if (chunk <= kPersistentMinChunk || chunk > kPersistentMaxChunk) return 0;
  return (rows + 1) / 2 * 2 + 2 * kSoftmaxCluster * rows;
}

// The (max, sum) pairs of grid_workspace_words's layout: after the rows' counts, padded to an
// even count so that the pairs are 8-byte aligned.
__device__ __forceinline__ float2* grid_pairs(const SoftmaxParams& p) {
  return reinterpret_cast<float2*>(p.grid_ws + (p.rows + 1) / 2 * 2);
}

// softmax_grid_kernel's exchange, by thread 0 of each of a row's 8
// CTAs: the CTA's (max, sum) into its slot of the row's `pairs`, counted in with a release add on
// the row's `count`; then a wait (acquire) until all 8 have, and their pairs combined into
// {base, 1 / the row's sum} (a row of all -inf: base 0 and a sum of 0).
__device__ __forceinline__ float2 grid_normalizer(uint32_t* count, float2* pairs, int rank, float m,
                                                  float s) {
  constexpr int C = kSoftmaxCluster;
  pairs[rank] = make_float2(m, s);
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
  uint32_t seen = 0;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
  } while (seen < C);
  float2 q[C];
  float gm = -INFINITY;
#pragma unroll
  for (int r = 0; r < C; ++r) {
    q[r] = __ldcg(pairs + r);
    gm = fmaxf(gm, q[r].x);
  }
  const float base = gm == -INFINITY ? 0.f : gm;
  float gs = 0.f;
#pragma unroll
  for (int r = 0; r < C; ++r) gs += q[r].x == -INFINITY ? 0.f : q[r].y * exp2_approx(q[r].x - base);
  return make_float2(base, 1.f / gs);
}

// softmax_persistent_kernel's loop with the cluster exchange replaced: CTA 8g + k takes chunk k
// of rows g, g + groups, ...; for each row thread 0 writes the CTA's (max, sum), counts itself in
// with a release add, waits (acquire) until the row's 8 CTAs have, and combines their pairs. The
// cooperative launch makes every CTA resident, so the wait ends: the 8 CTAs of a row take the
// same rows in the same order. The counts start at 0: launch_grid zeroes them with
// cudaMemsetAsync before the launch (a CUDA graph captures the memset with the kernel).
// NOTE: measured (session 15, CUPTI, 128 x 128 256 fp32, same call) against two ways to skip the
// memset: the kernel zeroing the counts itself behind a split cooperative-grid barrier (arrive
// after the zeroing, wait before the first count) 42.6 us against 40.6 — the barrier costs more
// than the memset it saves; and flagged 64-bit pairs (one relaxed store a CTA into slots filled
// with a sentinel, lanes 0-7 of warp 0 polling one slot each: no fence, no atomic) 45.4. The
// memset in the binding and torch.zeros in Python measured the same (40.6 / 40.7). Session 16:
// counts that only grow (C a row a call, each CTA waiting for the multiple of C above the count
// its atom.add returned) in a zeroed buffer kept across calls, so no memset: 40.19 / 40.35 against
// 40.96 / 41.02 (-0.7 us). Not adopted: it needs a workspace that outlives the call, one a stream
// (concurrent streams must not share counts), zeroed once — left for when 0.7 us decides a target.
// NOTE: also measured (session 15, EMBER_SOFTMAX_PIPE, removed): one CTA an SM holding two rows'
// chunks in shared memory and staggering them, so that row k's exchange overlapped row k + 1's
// staging: 50.1 us fp32 / 51.4 bf16 against 40.9 / 37.3. With one row's loads in flight an SM
// instead of two CTAs' (and bf16 half of fp32's bytes, and slower), what the two CTAs an SM buy
// here is bytes in flight, not overlap of the exchange. (Session 16 refuted that reading: the
// bulk kernel, noted below, kept two rows in flight with one CTA an SM and lost too.)
// NOTE: measured (session 17, CUPTI, same call): 16 chunks a row in CTAs of 256 threads, 4 an SM
// (the same registers and bytes in flight an SM as 2 of 512, four CTAs in different phases, 16
// pairs an exchange combined in one online pass): 128 x 128 256 fp32 42.59 us (twice) against
// 40.96 / 41.02, bf16 36.80 against 37.66; 64 rows 23.46 / 20.51 against 23.04 / 20.39. More,
// smaller CTAs an SM do not help: removed.
// NOTE: measured (session 18, EMBER_SOFTMAX_LAG, removed; on an H100, CUPTI, same call): jobs of
// 4 096 elements in 256-thread CTAs, 4 an SM, no lockstep exchange: each job publishes its (max,
// sum) and counts in; L rounds later the CTA rereads its chunk from L2 and stores. 128 x 128 256
// fp32 64.3 us (L = 1) / 68.5 (L = 2) against 49.7, bf16 66.2 / 59.9 against 41.0; 64 rows
// 33.6 / 35.0 fp32 / bf16 (the default's 64-row run timed out). Reading every chunk twice, the
// second time from L2, costs far more than the exchange it hides: removed.
// NOTE: measured (session 20, an H100, CUPTI, interleaved twice; tools/release_probe.cu): a
// GPU-scope release add waits for the CTA's loads in flight, not only its warp's (9 100-9 900
// cycles with 8 16-byte loads of each thread in flight, 8 300 with only the other warps', 176
// relaxed), so thread 0's exchange here ends only after the CTA's loads of the next row have
// landed. Issuing warp 0's loads after the release instead
// (EMBER_SOFTMAX_LATE0, both grid-path kernels) lost: 128 x 128 256 fp32 50.75 / 50.69 us
// against 49.79 / 49.73, bf16 41.22 / 41.63 against 38.69 / 38.56. Removed.
// NOTE: measured (session 19, an H100, CUPTI, interleaved): softmax_grid_kernel reducing with
// pair_normalizer (three barriers a row instead of six) ran 49.89 / 49.98 us at 128 x 128 256 fp32
// against 50.08 / 49.98, bf16 42.02 / 41.98 against 41.70 / 41.83: a tie, so it keeps its
// block_reduce pair.
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads, 2) softmax_grid_kernel(SoftmaxParams p) {
  static_assert(EMBER_SOFTMAX_ONLINE || sizeof(T) == 0,  // (dependent: checked if instantiated)
                "softmax_grid_kernel exchanges online (max, sum) pairs");
  constexpr int C = kSoftmaxCluster;
  extern __shared__ __align__(16) float row_smem[];  // [chunk] values
  __shared__ float scratch[kSoftmaxThreads / 32];
  __shared__ float2 norm;  // the row's {base, 1 / sum}, from thread 0
  uint32_t* arrived = p.grid_ws;
  float2* pairs = grid_pairs(p);
  const int rank = static_cast<int>(blockIdx.x % C);
  const int64_t groups = gridDim.x / C;
  ChunkPrefetch<T> chunk(p, rank);
  const int t = chunk.t;
  int64_t row = blockIdx.x / C;
  if (row < p.rows) chunk.issue(row);
  for (; row < p.rows; row += groups) {
    const float t_row = p.temperature != nullptr ? p.temperature[row] : p.scalar_temperature;
    const float scale = kLog2e / t_row;
    RowStats<> st;
    __syncthreads();  // the previous row's store pass is done reading row_smem
    chunk.stage(row_smem, scale, st);
    if (row + groups < p.rows) chunk.issue(row + groups);  // in flight while this row finishes
    const float m = block_reduce<true>(st.m, scratch);     // (its barrier also publishes row_smem)
    const float s =
        block_reduce<false>(st.m == -INFINITY ? 0.f : st.s * exp2_approx(st.m - m), scratch);
    if (t == 0) norm = grid_normalizer(arrived + row, pairs + row * C, rank, m, s);
    __syncthreads();
    const float2 nz = norm;
    store_probs(p.probs + row * p.probs_row_stride + chunk.begin, row_smem, chunk.n, nz.x, nz.y);
  }
}

// (m, s) += (m2, s2), s a sum of 2^(x - m); a pair of maximum -inf is empty (its sum 0).
__device__ __forceinline__ void pair_add(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;
  s = s * exp2_approx(m - mm) + s2 * exp2_approx(m2 - mm);
  m = mm;
}
// A CTA's threads' (max, sum) pairs reduced in one pass (warps by shuffles, then warp 0), and
// thread 0's exchange (grid_normalizer) into `norm`; the caller's barrier publishes it. One
// barrier here, against three for two block_reduce calls.
__device__ __forceinline__ void pair_normalizer(float pm, float ps, float2* wpairs, float2& norm,
                                                uint32_t* count, float2* pairs, int rank) {
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    pair_add(pm, ps, __shfl_xor_sync(0xffffffffu, pm, o), __shfl_xor_sync(0xffffffffu, ps, o));
  }
  if (t % 32 == 0) wpairs[t / 32] = make_float2(pm, ps);
  __syncthreads();
  if (t < 32) {
    const float2 w = t < kSoftmaxThreads / 32 ? wpairs[t] : make_float2(-INFINITY, 0.f);
    pm = w.x;
    ps = w.y;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      pair_add(pm, ps, __shfl_xor_sync(0xffffffffu, pm, o), __shfl_xor_sync(0xffffffffu, ps, o));
    }
    if (t == 0) norm = grid_normalizer(count, pairs, rank, pm, ps);
  }
}

// softmax_reg_kernel: softmax_grid_kernel's rows, CTAs and exchange, with the roles of registers
// and shared memory swapped. The next row's chunk lands raw in shared memory by cp.async (each
// thread copies the packs it will read itself, so no barrier guards the landing zone), and the
// current row lives in registers as 2^(x - m_t), m_t the thread's own maximum: one ex2 a value
// (the grid kernel's staging and store pass take two or more), and the store pass is one
// multiply a value by the thread's factor 2^(m_t - base) / sum. The next row's copies are issued
// as soon as the thread has read its packs, before any arithmetic on the current row; the CTA's
// (max, sum) pairs reduce in one pass (pair_normalizer). A pack is 4 values whatever the dtype
// (16 bytes of fp32, 8 of bf16 / fp16), so each warp's loads and 16-byte stores are contiguous.
// Which rows take it (EMBER_SOFTMAX_REG): 2 (default) 16-bit logits, 1 every dtype, 0 none.
// NOTE: measured (session 19, an H100, CUPTI, against softmax_grid_kernel in the same call,
// notes/act.md): 128 x 128 256 bf16 38.91 / 38.24 us against 41.70 / 41.83, 64 rows 21.09 /
// 20.96 against 22.72 / 22.88; fp32 53.73 / 53.34 against 50.08 / 49.98 (64 rows 31.0 against
// 28.0), hence 16-bit only. The first form, with two block_reduce calls (five barriers a row),
// ran fp32 58.2 and bf16 38.6-39.0.
#ifndef EMBER_SOFTMAX_REG
#define EMBER_SOFTMAX_REG 2
#endif
// Pack i (4 values) of a raw chunk in shared memory, as fp32: one 16- or 8-byte shared load.
__device__ __forceinline__ void load_pack4(const float* landing, int i, float (&x)[4]) {
  const float4 w = reinterpret_cast<const float4*>(landing)[i];
  x[0] = w.x;
  x[1] = w.y;
  x[2] = w.z;
  x[3] = w.w;
}
template <typename T16>
__device__ __forceinline__ void load_pack4(const T16* landing, int i, float (&x)[4]) {
  const uint2 w = reinterpret_cast<const uint2*>(landing)[i];
  const uint32_t h[4] = {w.x & 0xffffu, w.x >> 16, w.y & 0xffffu, w.y >> 16};
#pragma unroll
  for (int j = 0; j < 4; ++j) x[j] = to_float(T16{static_cast<uint16_t>(h[j])});
}
__device__ __forceinline__ void store_v4(float* dst, float a, float b, float c, float d) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads, 2) softmax_reg_kernel(SoftmaxParams p) {
  static_assert(EMBER_SOFTMAX_ONLINE || sizeof(T) == 0,  // (dependent: checked if instantiated)
                "softmax_reg_kernel exchanges online (max, sum) pairs");
  constexpr int C = kSoftmaxCluster;
  constexpr int kBytes = 4 * static_cast<int>(sizeof(T));  // a pack's
  constexpr int kPacks = kPersistentMaxChunk / 4 / kSoftmaxThreads;
  constexpr int kV = kPacks * 4;                                // values a thread holds (32)
  extern __shared__ __align__(16) unsigned char landing_raw[];  // [chunk] raw logits
  T* landing = reinterpret_cast<T*>(landing_raw);
  __shared__ float2 wpairs[kSoftmaxThreads / 32];  // a warp's (max, sum)
  __shared__ float2 norm;                          // the row's {base, 1 / sum}, from thread 0
  uint32_t* arrived = p.grid_ws;
  float2* pairs = grid_pairs(p);
  const int rank = static_cast<int>(blockIdx.x % C);
  const int64_t groups = gridDim.x / C;
  const int t = static_cast<int>(threadIdx.x);
  const int64_t begin = static_cast<int64_t>(rank) * p.chunk;
  const int packs = chunk_length(p.vocab, p.chunk, begin) / 4;  // (p.vec: n % 8 == 0)
  auto issue = [&](int64_t r) {
    const char* src = reinterpret_cast<const char*>(static_cast<const T*>(p.logits) +
                                                    r * p.logits_row_stride + begin);
#pragma unroll
    for (int u = 0; u < kPacks; ++u) {
      const int i = t + u * kSoftmaxThreads;
      if (i < packs) {
        if constexpr (kBytes == 16) {
          cp_async16(smem_u32(landing_raw + i * kBytes), src + i * kBytes);
        } else {
          cp_async8(smem_u32(landing_raw + i * kBytes), src + i * kBytes);
        }
      }
    }
    cp_commit();
  };
  int64_t row = blockIdx.x / C;
  if (row < p.rows) issue(row);
  for (; row < p.rows; row += groups) {
    const float t_row = p.temperature != nullptr ? p.temperature[row] : p.scalar_temperature;
    const float scale = kLog2e / t_row;
    float v[kV];
    cp_wait<0>();  // this thread's own copies of the row have landed
#pragma unroll
    for (int u = 0; u < kPacks; ++u) {
      const int i = t + u * kSoftmaxThreads;
      float x[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
      if (i < packs) {
        load_pack4(landing, i, x);
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] *= scale;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) v[u * 4 + j] = x[j];
    }
    if (row + groups < p.rows) issue(row + groups);  // in flight while this row finishes
    float mt = -INFINITY;
#pragma unroll
    for (int k = 0; k < kV; ++k) mt = fmaxf(mt, v[k]);
    const float mref = mt == -INFINITY ? 0.f : mt;  // (a thread of only -inf: every 2^x is 0)
    float st = 0.f;
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      v[k] = exp2_approx(v[k] - mref);
      st += v[k];
    }
    pair_normalizer(mt, st, wpairs, norm, arrived + row, pairs + row * C, rank);
    __syncthreads();
    const float2 nz = norm;
    // 2^(x - base) / sum = 2^(x - mt) * 2^(mt - base) / sum; a thread of only -inf takes
    // 2^(-inf) = 0 (NaN when the whole row is -inf and the sum is 0, as documented)
    const float f = exp2_approx(mt - nz.x) * nz.y;
    float* out = p.probs + row * p.probs_row_stride + begin;
#pragma unroll
    for (int u = 0; u < kPacks; ++u) {
      const int i = t + u * kSoftmaxThreads;
      if (i < packs) {
        store_v4(out + i * 4, v[u * 4] * f, v[u * 4 + 1] * f, v[u * 4 + 2] * f, v[u * 4 + 3] * f);
      }
    }
  }
}

// NOTE: measured (session 16) and removed: softmax_bulk_kernel (EMBER_SOFTMAX_BULK), one CTA of
// 1 024 threads an SM holding 3 fp32 / 6 bf16 raw chunks in shared memory, filled two / five rows
// ahead by cp.async.bulk on mbarriers: 54.7 us fp32 / 53.2 bf16 at 128 x 128 256 against 40.9 /
// 37.0 (2 raw chunks: 53.5 / 51.8); ncu: DRAM 30 %, warps waiting at the CTA barriers. With two
// rows' loads in flight an SM it was no faster than with one: what the two CTAs an SM buy is
// one CTA's reduce, exchange and store overlapping the other's, not bytes in flight.

// softmax_persistent_kernel<T, C> over rows in chunks of p.chunk, when that is more rows than its
// clusters hold at once; false: not launched (fewer rows, or the occupancy query failed).
template <typename T, int C>
bool launch_persistent(const SoftmaxParams& p, cudaStream_t stream, cudaError_t& err) {
  constexpr auto kernel = softmax_persistent_kernel<T, C>;
  const size_t smem = (static_cast<size_t>(p.chunk) + 4) * sizeof(float);
  const int clusters = resident_clusters<kernel, C>(p.device, p.chunk, smem);
  if (clusters <= 0 || p.rows <= clusters) return false;
  err = launch_kernel<kernel>(dim3(static_cast<unsigned>(clusters * C)), dim3(kSoftmaxThreads),
                              smem, stream, p.pdl, p.device, p);
  return true;
}

// EMBER_SOFTMAX_NARROW: softmax_persistent_kernel<T, C> over rows split in C = 2 or 4 chunks
// instead of kSoftmaxCluster. NOTE: an 8-CTA cluster for a 32 000-element row gives 4 000-element
// chunks: 512 x 32 000 fp32 ran ~8 lockstep waves of 4 096 CTAs, each with cluster barriers, at
// 0.67x torch.compile (session 9). 2 CTAs of 16 000 elements: 38.30 against 73.41 us
// (torch.compile 49.28); 256 x 49 152, 4 CTAs: 33.09 against 46.37 (session 10, same run).
#ifndef EMBER_SOFTMAX_NARROW
#define EMBER_SOFTMAX_NARROW 1  // NOTE: 0 = 8-CTA clusters for these rows too (A/B)
#endif
template <typename T, int C>
bool launch_narrow(const SoftmaxParams& p, cudaStream_t stream, cudaError_t& err) {
  SoftmaxParams q = p;
  q.chunk = static_cast<int>((p.vocab + C - 1) / C + 7) / 8 * 8;
  return q.chunk <= kPersistentMaxChunk && launch_persistent<T, C>(q, stream, err);
}

// Whether launch_grid takes softmax_reg_kernel for logits of type T (EMBER_SOFTMAX_REG).
template <typename T>
constexpr bool kRegRows = EMBER_SOFTMAX_REG == 1 || (EMBER_SOFTMAX_REG == 2 && sizeof(T) == 2);
// The kernel launch_grid launches (only that one instantiated).
template <typename T>
constexpr auto grid_kernel() {
  if constexpr (kRegRows<T>) {
    return softmax_reg_kernel<T>;
  } else {
    return softmax_grid_kernel<T>;
  }
}

// grid_kernel<T>() (softmax_grid_kernel, or softmax_reg_kernel for 16-bit logits) over the rows
// grid_workspace_words takes, given their workspace: a grid of as many CTAs as fit at once (a
// multiple of 8); false: not launched.
template <typename T>
bool launch_grid(const SoftmaxParams& p, cudaStream_t stream, cudaError_t& err) {
  constexpr bool kReg = kRegRows<T>;
  constexpr auto kernel = grid_kernel<T>();
  if (p.grid_ws == nullptr || grid_workspace_words(p.rows, p.vocab) == 0) return false;
  // (softmax_reg_kernel stores 16 bytes at a time: it takes 16-byte aligned output rows; the
  // others fall back to softmax_persistent_kernel)
  if (kReg && (reinterpret_cast<uintptr_t>(p.probs) % 16 != 0 || p.probs_row_stride % 4 != 0)) {
    return false;
  }
  const size_t smem = static_cast<size_t>(p.chunk) * (kReg ? sizeof(T) : sizeof(float));
  constexpr int kMaxDevices = 64;
  static int key_of[kMaxDevices] = {};
  static int per_sm_of[kMaxDevices] = {};  // resident CTAs an SM at that chunk
  if (p.device < 0 || p.device >= kMaxDevices) return false;
  if (key_of[p.device] != p.chunk) {
    int per_sm = 0;
    if (allow_dynamic_smem<kernel>(smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kSoftmaxThreads, smem) !=
            cudaSuccess) {
      per_sm = 0;
    }
    cudaGetLastError();  // a failed query leaves no sticky error; the caller falls back
    key_of[p.device] = p.chunk;
    per_sm_of[p.device] = per_sm;
  }
  const int64_t groups =
      static_cast<int64_t>(per_sm_of[p.device]) * stream_grid(p.device) / kSoftmaxCluster;
  if (groups <= 0) return false;
  const int64_t used = p.rows < groups ? p.rows : groups;
  // the counts start at 0 (the workspace comes in with any contents: torch.empty)
  err = cudaMemsetAsync(p.grid_ws, 0, static_cast<size_t>(p.rows) * sizeof(uint32_t), stream);
  if (err != cudaSuccess) return true;
  err = launch_cooperative<kernel>(dim3(static_cast<unsigned>(used * kSoftmaxCluster)),
                                   dim3(kSoftmaxThreads), smem, stream, p);
  return true;
}

template <typename T>
cudaError_t launch_softmax(const SoftmaxParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.vocab == 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  if constexpr (EMBER_SOFTMAX_NARROW != 0) {
    if (p.vec && p.vocab > kPersistentMaxChunk && p.vocab <= 4 * kPersistentMaxChunk &&
        (p.vocab <= 2 * kPersistentMaxChunk ? launch_narrow<T, 2>(p, stream, err)
                                            : launch_narrow<T, 4>(p, stream, err))) {
      return err;
    }
  }
  // (the grid kernel exchanges online (max, sum) pairs)
  if constexpr (EMBER_SOFTMAX_GRID != 0 && EMBER_SOFTMAX_ONLINE != 0) {
    if (p.vec && launch_grid<T>(p, stream, err)) return err;
  }
  if (EMBER_SOFTMAX_PERSISTENT && p.vec && p.chunk > kPersistentMinChunk &&
      p.chunk <= kPersistentMaxChunk && launch_persistent<T, kSoftmaxCluster>(p, stream, err)) {
    return err;
  }
  const size_t smem = (static_cast<size_t>(p.chunk) + 4) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(p.rows * kSoftmaxCluster));
  if (p.vec) {
    return launch_kernel<softmax_kernel<T, true>>(grid, dim3(kSoftmaxThreads), smem, stream, p.pdl,
                                                  p.device, p);
  }
  return launch_kernel<softmax_kernel<T, false>>(grid, dim3(kSoftmaxThreads), smem, stream, p.pdl,
                                                 p.device, p);
}

}  // namespace sampling
}  // namespace ember

#pragma nv_diagnostic pop
