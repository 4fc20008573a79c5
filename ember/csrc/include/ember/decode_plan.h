// The batch-decode planner: split-KV work units from the paged lengths. Host-only, framework-free
// (R3.1): plain integers in, plain integers out; the binding (csrc/ops/decode_plan.cc) validates.
//
// A work unit is one (request, token range) pair; the decode kernel runs one CTA per unit and kv
// head. A request whose range is split into n > 1 units gets n partial-result slots, merged after
// the decode kernel; a request in one unit is written straight to the output (slot -1).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

namespace ember {
namespace decode {

// Rows of the work table (int32, [capacity, kWorkFields]).
constexpr int kWorkFields = 4;
enum WorkField { kRequest = 0, kKvStart = 1, kKvEnd = 2, kSlot = 3 };

enum PlanError {
  kPlanOk = 0,
  kIndptrStart,       // indptr[0] != 0
  kIndptrDecreasing,  // indptr[b + 1] < indptr[b]         (index b)
  kLastPageLen,       // last_page_len[b] outside [1, page_size] for a request with pages (b)
  kCapacity,          // more work units than the table holds
  kPartialCapacity,   // more partial slots than the workspace holds
};

struct PlanArgs {
  const int32_t* indptr;         // [batch + 1]
  const int32_t* last_page_len;  // [batch]
  int batch;
  int page_size;
  int kv_heads;
  int window_left;   // -1: no sliding window; else attend to the last window_left + 1 tokens
  int target_ctas;   // CTAs that fill the GPU once (SMs x resident decode CTAs per SM)
  int min_chunk;     // smallest split, tokens (rounded up to whole pages)
  int capacity;      // rows of the work table
  int max_partials;  // slots of the partial-result workspace
};

struct PlanResult {
  int error = kPlanOk;
  int64_t bad_index = -1;  // the request (or count) the error is about
  int n_work = 0;
  int chunk = 0;  // tokens per unit (0: no request was split)
  int n_partials = 0;
};

// The tokens a request attends to: [start, len).
inline void attended(const PlanArgs& a, int b, int64_t* start, int64_t* len) {
  const int64_t pages = a.indptr[b + 1] - a.indptr[b];
  const int64_t n = pages == 0 ? 0 : (pages - 1) * a.page_size + a.last_page_len[b];
  *len = n;
  *start = a.window_left >= 0 ? std::max<int64_t>(0, n - 1 - a.window_left) : 0;
}

inline int64_t units_for(int64_t tokens, int64_t chunk) {
  return tokens <= chunk ? 1 : (tokens + chunk - 1) / chunk;
}

inline int64_t round_up(int64_t x, int64_t g) { return (x + g - 1) / g * g; }

// Cost model of the planner, in "tokens one CTA streams" (the kernels' unit of time):
// a CTA's fixed cost (query load, pipeline fill, combine) and the merge of split requests.
constexpr int64_t kCtaCost = 64;
constexpr int64_t kSplitCost = 256;

// Request b split into pieces of `piece` tokens (the last shorter): the pieces of a split of at
// most `chunk` tokens, made even and rounded up to the granule.
inline int64_t piece_for(int64_t tokens, int64_t chunk, int64_t granule) {
  if (tokens <= chunk) return std::max<int64_t>(tokens, 1);
  const int64_t u = (tokens + chunk - 1) / chunk;
  return round_up((tokens + u - 1) / u, granule);
}

// Fills work[capacity * kWorkFields] and merge_indptr[batch + 1]: merge_indptr[b + 1] -
// merge_indptr[b] is the number of partial slots of request b (0: written directly).
//
// Split-KV: every request is cut into pieces of at most `chunk` tokens (evenly, whole granules);
// each piece is one CTA per kv head. Candidates for `chunk` are the longest request's length
// divided by k = 1, 2, 3, ...; each is scored as the time of the slowest SM when the CTAs run in
// waves of target_ctas (waves x mean CTA time, or the longest CTA if that is more) plus the merge
// when anything is split, and the cheapest wins. So a uniform batch that fills whole waves is not
// split, a small one is cut to fill one wave, and a skewed one has its long requests cut to the
// size that balances the SMs. When pieces differ in length the longest are emitted first (the
// hardware starts CTAs in order: longest-first list scheduling).
inline PlanResult plan(const PlanArgs& a, int32_t* work, int32_t* merge_indptr) {
  PlanResult r;
  if (a.batch > 0 && a.indptr[0] != 0) {
    r.error = kIndptrStart;
    r.bad_index = 0;
    return r;
  }
  std::vector<int64_t> start(a.batch), len(a.batch);
  int64_t max_tokens = 0;
  int64_t total_tokens = 0;
  for (int b = 0; b < a.batch; ++b) {
    if (a.indptr[b + 1] < a.indptr[b]) {
      r.error = kIndptrDecreasing;
      r.bad_index = b;
      return r;
    }
    if (a.indptr[b + 1] > a.indptr[b] &&
        (a.last_page_len[b] < 1 || a.last_page_len[b] > a.page_size)) {
      r.error = kLastPageLen;
      r.bad_index = b;
      return r;
    }
    int64_t s0, n;
    attended(a, b, &s0, &n);
    start[b] = s0;
    len[b] = n - s0;
    max_tokens = std::max(max_tokens, len[b]);
    total_tokens += len[b];
  }
  const int64_t kv = std::max(1, a.kv_heads);
  const int64_t slots_per_wave = std::max(1, a.target_ctas);
  // Pieces end on whole pages, and on whole 64-token tiles where pages are smaller.
  const int64_t granule = 64 % a.page_size == 0 ? 64 : a.page_size;
  const int64_t min_chunk = round_up(std::max(a.min_chunk, 1), granule);
  auto score = [&](int64_t chunk, int64_t* units, int64_t* partials) {
    int64_t n = 0, parts = 0, longest = 0;
    for (int b = 0; b < a.batch; ++b) {
      const int64_t piece = piece_for(len[b], chunk, granule);
      const int64_t u = units_for(len[b], piece);
      n += u;
      if (u > 1) parts += u;
      longest = std::max(longest, std::min(piece, len[b]));
    }
    *units = n;
    *partials = parts;
    const int64_t ctas = n * kv;
    const int64_t waves = (ctas + slots_per_wave - 1) / slots_per_wave;
    const int64_t mean = (total_tokens + n - 1) / std::max<int64_t>(n, 1);
    return std::max(longest, waves * mean) + waves * kCtaCost + (parts > 0 ? kSplitCost : 0);
  };
  int64_t chunk = std::max<int64_t>(max_tokens, 1);
  int64_t best_units = 0, best_parts = 0;
  int64_t best = score(chunk, &best_units, &best_parts);
  // NOTE: a batch of many full waves whose longest request is shorter than an SM's share is
  // balanced as it is (the common large uniform batch; skips the search).
  const bool balanced = static_cast<int64_t>(a.batch) * kv >= 4 * slots_per_wave &&
                        max_tokens * slots_per_wave <= total_tokens * kv;
  if (!balanced && max_tokens > min_chunk) {
    for (int64_t k = 2;; k += k < 8 ? 1 : k / 4) {
      const int64_t c = round_up((max_tokens + k - 1) / k, granule);
      if (c < min_chunk) break;
      int64_t units, parts;
      const int64_t cost = score(c, &units, &parts);
      if (units > a.capacity || parts > a.max_partials) break;  // only grows with k
      if (cost < best) {
        best = cost;
        chunk = c;
        best_units = units;
        best_parts = parts;
      }
      if (units * kv > 8 * slots_per_wave) break;  // past 8 waves nothing gains
    }
  }
  (void)best_parts;
  if (best_units > a.capacity) {
    r.error = kCapacity;
    r.bad_index = best_units;
    return r;
  }
  // Slots per request in request order (the merge reads merge_indptr[b] .. merge_indptr[b + 1]).
  std::vector<int64_t> piece(a.batch);
  int64_t slots = 0;
  int64_t shortest = INT64_MAX, longest = 0;
  merge_indptr[0] = 0;
  for (int b = 0; b < a.batch; ++b) {
    piece[b] = piece_for(len[b], chunk, granule);
    const int64_t u = units_for(len[b], piece[b]);
    if (u > 1) slots += u;
    if (slots > a.max_partials) {
      r.error = kPartialCapacity;
      r.bad_index = slots;
      return r;
    }
    merge_indptr[b + 1] = static_cast<int32_t>(slots);
    shortest = std::min(shortest, std::min(piece[b], len[b]));
    longest = std::max(longest, std::min(piece[b], len[b]));
  }
  std::vector<int> order(a.batch);
  for (int b = 0; b < a.batch; ++b) order[b] = b;
  if (slots > 0 && longest > 2 * std::max<int64_t>(shortest, 1)) {
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      return std::min(piece[x], len[x]) > std::min(piece[y], len[y]);
    });
  }
  int64_t n = 0;
  for (int b : order) {
    const int64_t u = units_for(len[b], piece[b]);
    for (int64_t j = 0; j < u; ++j) {
      int32_t* row = work + (n + j) * kWorkFields;
      row[kRequest] = b;
      row[kKvStart] = static_cast<int32_t>(start[b] + j * piece[b]);
      row[kKvEnd] = static_cast<int32_t>(start[b] + std::min(len[b], (j + 1) * piece[b]));
      row[kSlot] = u > 1 ? static_cast<int32_t>(merge_indptr[b] + j) : -1;
    }
    n += u;
  }
  for (int64_t i = n; i < a.capacity; ++i) {  // unused rows: CTAs launched for them exit
    int32_t* row = work + i * kWorkFields;
    row[kRequest] = -1;
    row[kKvStart] = row[kKvEnd] = 0;
    row[kSlot] = -1;
  }
  r.n_work = static_cast<int>(n);
  r.chunk = slots > 0 ? static_cast<int>(chunk) : 0;
  r.n_partials = static_cast<int>(slots);
  return r;
}

}  // namespace decode
}  // namespace ember
