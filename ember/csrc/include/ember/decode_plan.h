// The batch-decode planner: split-KV work units from the paged lengths. Host-only, framework-free
// (R3.1): plain integers in, plain integers out; the binding (csrc/ops/decode_plan.cc) validates.
//
// A work unit is one (request, token range) pair; the decode kernel runs one CTA per unit and kv
// head. A request whose range is split into n > 1 units gets n partial-result slots, merged after
// the decode kernel; a request in one unit is written straight to the output (slot -1).
#pragma once

#include <algorithm>
#include <cstdint>

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

// Fills work[capacity * kWorkFields] and merge_indptr[batch + 1]: merge_indptr[b + 1] -
// merge_indptr[b] is the number of partial slots of request b (0: written directly).
inline PlanResult plan(const PlanArgs& a, int32_t* work, int32_t* merge_indptr) {
  PlanResult r;
  if (a.batch > 0 && a.indptr[0] != 0) {
    r.error = kIndptrStart;
    r.bad_index = 0;
    return r;
  }
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
    int64_t start, len;
    attended(a, b, &start, &len);
    max_tokens = std::max(max_tokens, len - start);
    total_tokens += len - start;
  }
  // Split only when one unit per request leaves SMs idle; then the smallest whole-page chunk
  // (>= min_chunk) whose units still fit in one wave of target_ctas.
  const int64_t page = a.page_size;
  const int64_t kv = std::max(1, a.kv_heads);
  int64_t chunk = std::max<int64_t>(max_tokens, 1);
  if (static_cast<int64_t>(a.batch) * kv < a.target_ctas && max_tokens > a.min_chunk) {
    const int64_t min_chunk = (std::max(a.min_chunk, 1) + page - 1) / page * page;
    int64_t lo = min_chunk, hi = (max_tokens + page - 1) / page * page;
    auto units = [&](int64_t c) {
      int64_t u = 0;
      for (int b = 0; b < a.batch; ++b) {
        int64_t start, len;
        attended(a, b, &start, &len);
        u += units_for(len - start, c);
      }
      return u;
    };
    while (lo < hi) {  // smallest chunk (in whole pages) with units * kv <= target
      const int64_t mid = (lo / page + (hi - lo) / page / 2) * page;
      if (units(mid) * kv <= a.target_ctas) {
        hi = mid;
      } else {
        lo = mid + page;
      }
    }
    chunk = lo;
  }
  int64_t n = 0;
  int64_t slots = 0;
  merge_indptr[0] = 0;
  for (int b = 0; b < a.batch; ++b) {
    int64_t start, len;
    attended(a, b, &start, &len);
    const int64_t u = units_for(len - start, chunk);
    if (n + u > a.capacity) {
      r.error = kCapacity;
      r.bad_index = n + u;
      return r;
    }
    if (u > 1 && slots + u > a.max_partials) {
      r.error = kPartialCapacity;
      r.bad_index = slots + u;
      return r;
    }
    for (int64_t j = 0; j < u; ++j) {
      int32_t* row = work + (n + j) * kWorkFields;
      row[kRequest] = b;
      row[kKvStart] = static_cast<int32_t>(start + j * chunk);
      row[kKvEnd] = static_cast<int32_t>(std::min(len, start + (j + 1) * chunk));
      row[kSlot] = u > 1 ? static_cast<int32_t>(slots + j) : -1;
    }
    n += u;
    if (u > 1) slots += u;
    merge_indptr[b + 1] = static_cast<int32_t>(slots);
  }
  for (int64_t i = n; i < a.capacity; ++i) {  // unused rows: CTAs launched for them exit
    int32_t* row = work + i * kWorkFields;
    row[kRequest] = -1;
    row[kKvStart] = row[kKvEnd] = 0;
    row[kSlot] = -1;
  }
  r.n_work = static_cast<int>(n);
  r.chunk = chunk >= max_tokens ? 0 : static_cast<int>(chunk);
  r.n_partials = static_cast<int>(slots);
  return r;
}

}  // namespace decode
}  // namespace ember
