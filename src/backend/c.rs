//! The C emitter: one C99 function per program, destination-passing, and
//! its JSON manifest.
//!
//! `int atl_NAME(...)` takes the implicit sizes (in declaration order),
//! then the parameters in order: sizes as `int64_t`, reals as `double`,
//! tensors as `const double *` (row-major, contiguous), relations as
//! `const int64_t *` (their compressed layout,
//! [`super::marshal::compressed_layout`]), parameters of pair type as
//! their leaves;
//! then one `double *` per leaf of the result (pairs flattened left to
//! right, a tensor of pairs as one array per leaf). It returns
//! [`RET_OK`], or [`RET_NEGATIVE_DIMENSION`], [`RET_ALLOCATION`],
//! [`RET_OVERFLOW`], [`RET_INDEX_OVERFLOW`]. Compiled with `-DATL_COUNT_OPS` it also counts the
//! additions, multiplications and black-box calls it executes, the loop
//! iterations (bodies entered) and the predicate tests (conditions and
//! relation lookups evaluated) into the exported `uint64_t
//! atlpacked_ops[5]` (reset on every call).
//! `atlpacked_entry` is the same function with its arguments in arrays,
//! for callers that do not know the signature at compile time;
//! `atlpacked_threads(n)` sets the threads of its parallel loops; a
//! function with relations also has the entry points of relations
//! prepared once for many calls ([`super::prepared`]).

use super::split;
use crate::front::affine::Affine;
use crate::lower::int_literal;
use crate::lower::ir::{Function, IndexCheck, ParamC, Stmt};
use std::fmt::Write as _;

pub const RET_OK: i32 = 0;
/// A size or dimension is negative.
pub const RET_NEGATIVE_DIMENSION: i32 = 1;
/// The arena for the intermediates could not be allocated.
pub const RET_ALLOCATION: i32 = 2;
/// The intermediates' total size overflows 64 bits.
pub const RET_OVERFLOW: i32 = 3;
/// Index or dimension arithmetic would overflow 64 bits at these sizes
/// (checked on entry, before any work).
pub const RET_INDEX_OVERFLOW: i32 = 4;
/// The message for [`RET_INDEX_OVERFLOW`].
pub const INDEX_OVERFLOW_MESSAGE: &str =
    "index arithmetic overflows 64-bit integers at these sizes";

const PRELUDE: &str = r#"#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
/* Vector loops use 256-bit vectors on AVX2 without AVX-512: GCC's tuning
   for some of these CPUs (AMD Zen 1, -march=native) prefers 128-bit ones,
   which run the convolutions' and stencils' loops slower. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX2__) && !defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=256")
#endif

#if defined(__GNUC__) || defined(__clang__)
#define ATL_MAYBE_UNUSED __attribute__((unused))
#define ATL_NOINLINE __attribute__((noinline))
#else
#define ATL_MAYBE_UNUSED
#define ATL_NOINLINE
#endif

/* ATL_SIMD (set by the default build flags with -fopenmp): an
   innermost sum may add its terms in any order (SIMD lanes); never in the
   counting build, whose first-term flag is a loop-carried dependence. */
#define ATL_PRAGMA(x) _Pragma(#x)
#if defined(ATL_SIMD) && !defined(ATL_COUNT_OPS)
#define ATL_SIMD_REDUCE(a) ATL_PRAGMA(omp simd reduction(+:a))
#else
#define ATL_SIMD_REDUCE(a)
#endif
/* Parallel loops (built with -fopenmp; see lower/parallel.rs): a loop runs
   on all threads when its estimated work, in statements, is at least
   ATL_PAR_WORK; a parallel sum is cut into ATL_CHUNKS chunks whatever the
   number of threads; slots that live for one iteration get a copy per chunk
   when the copies fit in ATL_SCRATCH_MAX reals (the loop runs serially
   otherwise). Never in the counting build, which runs serially. */
#ifndef ATL_PAR_WORK
#define ATL_PAR_WORK 262144.0
#endif
#define ATL_CHUNKS 64
/* A test that chooses how a loop runs, not one of the program's (not
   counted): the rows of a block whose short sums run with the rows
   innermost (lower/tile.rs), a loop's prefetches (lower/prefetch.rs). */
#define ATL_SCHEDULE(c) (c)
#ifndef ATL_ROW_BLOCK
#define ATL_ROW_BLOCK 1024
#endif
/* The longest row a tie of the loop order interchanges (lower/order.rs). */
#ifndef ATL_ROW_LIMIT
#define ATL_ROW_LIMIT 4096
#endif
#ifndef ATL_SCRATCH_MAX
#define ATL_SCRATCH_MAX 8388608
#endif
/* A loop adds into per-chunk copies of a buffer only when its work is at
   least ATL_COPY_SHARE times the copies' size (they are zeroed and added
   back: that traffic must stay a small share of the loop's). */
#ifndef ATL_COPY_SHARE
#define ATL_COPY_SHARE 4.0
#endif
/* Chunk copies are made at every thread count (one included), so that a
   value does not depend on the number of threads; the counting build runs
   the loop as written. */
#ifdef ATL_COUNT_OPS
#define ATL_CHUNK_SCRATCH 0
#else
#define ATL_CHUNK_SCRATCH 1
#endif
#if defined(_OPENMP) && !defined(ATL_COUNT_OPS)
#define ATL_PARALLEL_FOR(c) ATL_PRAGMA(omp parallel for schedule(guided) if(c))
#define ATL_THREADS() omp_get_max_threads()
#else
#define ATL_PARALLEL_FOR(c)
#define ATL_THREADS() 1
#endif
/* Loops that write at least ATL_STREAM_BYTES of outputs in order store
   them with streaming (non-temporal) stores, by blocks of ATL_STREAM_BLOCK
   elements (lower/stream.rs); on x86 (SSE2, AVX or AVX-512 stores), never
   in the counting build. */
#ifndef ATL_STREAM_BYTES
#define ATL_STREAM_BYTES 4194304
#endif
/* 1024 with AVX-512; 16 with AVX or SSE2 stores, where a block's reads and
   its streaming stores overlap little when blocks are longer (on an AMD
   EPYC, Zen 1: 12-18% faster than ordinary stores at 16 to 64, 1-6% at 96
   and 128, none at 1024). */
#ifndef ATL_STREAM_BLOCK
#if defined(__AVX512F__)
#define ATL_STREAM_BLOCK 1024
#else
#define ATL_STREAM_BLOCK 16
#endif
#endif
/* Whole blocks (ATL_STREAM_BLOCK elements starting a line of each output)
   run a loop of ATL_STREAM_BLOCK iterations: a buffer of a few vectors
   that the C compiler keeps in registers, streamed from them
   (atlh_stream_whole), as if the vector loop stored by streaming stores
   itself. Only for short blocks; a partial block goes through the buffer. */
#ifndef ATL_STREAM_WHOLE
#define ATL_STREAM_WHOLE (ATL_STREAM_BLOCK <= 16 && ATL_STREAM_BLOCK % 8 == 0)
#endif
/* The shortest run of an inner loop that is streamed. */
#ifndef ATL_STREAM_RUN
#define ATL_STREAM_RUN 32
#endif
#if (defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__)) && !defined(ATL_COUNT_OPS) && !defined(ATL_NO_STREAM)
#define ATL_STREAM_OK(n, k) ((n) >= ATL_STREAM_BYTES / (8 * (k)))
/* atlh_nt8/4/2(d, s): 8, 4 or 2 doubles from s (any alignment) stored at d
   (aligned to their size) by one streaming store; atlh_nt_fence() orders
   them before later stores. GCC takes them from its builtins, which the
   intrinsics header wraps: that header is most of a small program's build
   time. */
#if defined(__GNUC__) && !defined(__clang__)
typedef double atlh_v8 __attribute__((vector_size(64), aligned(8), may_alias));
typedef double atlh_v4 __attribute__((vector_size(32), aligned(8), may_alias));
typedef double atlh_v2 __attribute__((vector_size(16), aligned(8), may_alias));
#define atlh_nt8(d, s) __builtin_ia32_movntpd512((d), *(const atlh_v8 *)(s))
#define atlh_nt4(d, s) __builtin_ia32_movntpd256((d), *(const atlh_v4 *)(s))
#define atlh_nt2(d, s) __builtin_ia32_movntpd((d), *(const atlh_v2 *)(s))
#define atlh_nt_fence() __builtin_ia32_sfence()
#else
#include <immintrin.h>
#define atlh_nt8(d, s) _mm512_stream_pd((d), _mm512_loadu_pd(s))
#define atlh_nt4(d, s) _mm256_stream_pd((d), _mm256_loadu_pd(s))
#define atlh_nt2(d, s) _mm_stream_pd((d), _mm_loadu_pd(s))
#define atlh_nt_fence() _mm_sfence()
#endif
/* d[0..n) = s[0..n): whole 64-byte lines of d by streaming stores, the
   partial lines at its ends by ordinary ones. */
static inline void atlh_stream(double *d, const double *s, int64_t n) {
  int64_t i = 0;
  for (; i < n && ((uintptr_t)(d + i) & 63) != 0; i++) d[i] = s[i];
#if defined(__AVX512F__)
  for (; i + 8 <= n; i += 8) atlh_nt8(d + i, s + i);
#elif defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    atlh_nt4(d + i, s + i);
    atlh_nt4(d + i + 4, s + i + 4);
  }
#else
  for (; i + 8 <= n; i += 8) {
    atlh_nt2(d + i, s + i);
    atlh_nt2(d + i + 2, s + i + 2);
    atlh_nt2(d + i + 4, s + i + 4);
    atlh_nt2(d + i + 6, s + i + 6);
  }
#endif
  for (; i < n; i++) d[i] = s[i];
}
/* d[0..ATL_STREAM_BLOCK) = s[0..ATL_STREAM_BLOCK) where d starts a line
   and the block is whole lines: streaming stores only. */
static inline void atlh_stream_whole(double *d, const double *s) {
#if defined(__AVX__)
  for (int64_t i = 0; i < ATL_STREAM_BLOCK; i += 4) atlh_nt4(d + i, s + i);
#else
  for (int64_t i = 0; i < ATL_STREAM_BLOCK; i += 2) atlh_nt2(d + i, s + i);
#endif
}
static inline void atlh_stream_fence(void) { atlh_nt_fence(); }
#else
#define ATL_STREAM_OK(n, k) 0
static inline void atlh_stream(double *d, const double *s, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = s[i];
}
static inline void atlh_stream_whole(double *d, const double *s) { atlh_stream(d, s, ATL_STREAM_BLOCK); }
static inline void atlh_stream_fence(void) {}
#endif
/* Elements of p past the start of its 64-byte line. */
static inline int64_t atlh_line_offset(const double *p) { return (int64_t)(((uintptr_t)p / sizeof(double)) % 8); }
#ifdef ATL_COUNT_OPS
uint64_t atlpacked_ops[5];
#define ATL_ITER() (atlpacked_ops[3]++)
#define ATL_TEST(c) (atlpacked_ops[4]++, (c))
#define ATL_SEEKS() (atlpacked_ops[4] += 2)
#define ATL_ADD(c) (atlpacked_ops[0] += (uint64_t)((c) != 0))
#define ATL_MUL() (atlpacked_ops[1]++)
#define ATL_CALL() (atlpacked_ops[2]++)
#define ATL_SUMADD(h) (atlpacked_ops[0] += (uint64_t)(h), (h) = 1)
#define ATL_FIRST_AT(h, n) uint8_t *h = (uint8_t *)calloc((size_t)(n) + 1, 1); if (h == NULL) { atlh_arena_give(atlv_arena); return 2; }
#define ATL_SUMADD_AT(h, i) (atlpacked_ops[0] += (uint64_t)(h)[i], (h)[i] = 1)
/* A block's partial sum added to element i: an addition when the block had
   a term (its flag `any`) and the element had one before. */
#define ATL_SUMADD_MERGE(h, i, any) ((any) ? (void)ATL_SUMADD_AT(h, i) : (void)0)
#define ATL_FIRST_AT_END(h) free(h)
#else
#define ATL_ITER() ((void)0)
#define ATL_TEST(c) (c)
#define ATL_SEEKS() ((void)0)
#define ATL_ADD(c) ((void)0)
#define ATL_MUL() ((void)0)
#define ATL_CALL() ((void)0)
#define ATL_SUMADD(h) ((void)0)
#define ATL_FIRST_AT(h, n) ((void)0)
#define ATL_SUMADD_AT(h, i) ((void)0)
#define ATL_SUMADD_MERGE(h, i, any) ((void)0)
#define ATL_FIRST_AT_END(h) ((void)0)
#endif

/* The arena of a call: the last call's arena is kept (one, of at most
   ATL_ARENA_KEEP doubles) and reused by the next call it is large enough
   for, so a call does not map and fault in fresh pages each time (a large
   malloc is an mmap). Calls on several threads at once take it in turn or
   allocate their own; the size is stored in front of the arena. On Linux
   an arena of at least ATL_ARENA_HUGE bytes is aligned to 2 MiB and asks
   for transparent huge pages (madvise): loops that gather rows of an
   intermediate at random places (a relation's far ends) then take a TLB
   miss per 2 MiB instead of one per 4 KiB page. */
#ifndef ATL_ARENA_KEEP
#define ATL_ARENA_KEEP ((size_t)1 << 27)
#endif
#ifndef ATL_ARENA_HUGE
#define ATL_ARENA_HUGE ((size_t)1 << 22)
#endif
#if defined(__GNUC__) || defined(__clang__)
static double *atlh_arena_kept;
static double *atlh_arena_alloc(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= ATL_ARENA_HUGE) {
    const size_t page = (size_t)1 << 21;
    if (bytes > SIZE_MAX - page) return NULL;
    const size_t whole = (bytes + page - 1) / page * page;
    void *p = aligned_alloc(page, whole);
    if (p != NULL) (void)madvise(p, whole, MADV_HUGEPAGE);
    return (double *)p;
  }
#endif
  return (double *)malloc(bytes);
}
static ATL_MAYBE_UNUSED double *atlh_arena_take(size_t n) {
  double *p = __atomic_exchange_n(&atlh_arena_kept, (double *)NULL, __ATOMIC_ACQ_REL);
  if (p != NULL && *(size_t *)p >= n) return p + 1;
  free(p);
  if (n > SIZE_MAX / sizeof(double) - 1) return NULL;
  p = atlh_arena_alloc((n + 1) * sizeof(double));
  if (p == NULL) return NULL;
  *(size_t *)p = n;
  return p + 1;
}
static ATL_MAYBE_UNUSED void atlh_arena_give(double *a) {
  if (a == NULL) return;
  double *p = a - 1;
  if (*(size_t *)p > ATL_ARENA_KEEP) {
    free(p);
    return;
  }
  free(__atomic_exchange_n(&atlh_arena_kept, p, __ATOMIC_ACQ_REL));
}
#else
static ATL_MAYBE_UNUSED double *atlh_arena_take(size_t n) { return (double *)malloc(n * sizeof(double)); }
static ATL_MAYBE_UNUSED void atlh_arena_give(double *a) { free(a); }
#endif

/* Index arithmetic (b > 0). */
static inline int64_t atlh_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t atlh_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t atlh_floordiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && a < 0) ? q - 1 : q; }
static inline int64_t atlh_ceildiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && a > 0) ? q + 1 : q; }
static inline int64_t atlh_mod(int64_t a, int64_t b) { int64_t r = a % b; return r < 0 ? r + b : r; }
/* (max a b), (min a b) of reals: the first operand unless the second is
   strictly better or NaN (so ties keep the first, NaN propagates), as the
   evaluator (MaxMin::apply); not fmax/fmin, which drop NaN. */
static inline double atlh_rmax(double a, double b) { return (b != b || a < b) ? b : a; }
static inline double atlh_rmin(double a, double b) { return (b != b || b < a) ? b : a; }
/* Work estimates and chunks of parallel loops. */
static inline double atlh_trip(int64_t lo, int64_t hi) { return hi > lo ? (double)hi - (double)lo : 0.0; }
static inline int64_t atlh_mid(int64_t lo, int64_t hi) { return hi > lo ? lo / 2 + hi / 2 : lo; }
static inline int64_t atlh_chunk(int64_t len, int64_t c) { return (len / ATL_CHUNKS) * c + (c < len % ATL_CHUNKS ? c : len % ATL_CHUNKS); }

/* Relations in their compressed layout (one int64_t array): arity k,
   the number of tuples, then per level l the offsets of its positions and
   coordinates. Level 0 is dense when k >= 2 (a position is the first
   coordinate); every other level is compressed: the children of position
   p are pos[p] .. pos[p + 1] - 1, their coordinates crd[...] ascending. A
   relation of arity 1 is one compressed level under the root position 0. */
#define ATL_RPOS(r, l) ((r) + (r)[2 + 2 * (l)])
#define ATL_RCRD(r, l) ((r) + (r)[3 + 2 * (l)])
/* The position in [lo, hi) of the coordinate x (ascending c), or -1. */
static inline int64_t atlh_find(const int64_t *c, int64_t lo, int64_t hi, int64_t x) {
  const int64_t end = hi;
  while (lo < hi) {
    const int64_t m = lo + (hi - lo) / 2;
    if (c[m] < x) lo = m + 1; else hi = m;
  }
  return lo < end && c[lo] == x ? lo : -1;
}
/* The first position in [lo, hi) whose coordinate (ascending c) is at
   least x, hi if none: a driven loop's range clipped to its bounds (the
   two seeks of a loop count as two tests, ATL_SEEKS). */
static inline int64_t atlh_seek(const int64_t *c, int64_t lo, int64_t hi, int64_t x) {
  if (lo == hi || c[lo] >= x) return lo;
  if (c[hi - 1] < x) return hi;
  while (lo < hi) {
    const int64_t m = lo + (hi - lo) / 2;
    if (c[m] < x) lo = m + 1; else hi = m;
  }
  return lo;
}
/* The first position in [at, end) whose coordinate (ascending c) is at
   least x, end if none, stepping from at: a cursor kept in step with a
   loop over ascending x (lower/relation.rs), which walks the row once. */
static inline int64_t atlh_advance(const int64_t *c, int64_t at, int64_t end, int64_t x) {
  while (at < end && c[at] < x) at++;
  return at;
}
/* Fetch into the cache the row of n doubles at p, which a loop over
   stored coordinates reads ATL_PREFETCH_AHEAD iterations later, or
   ATL_PREFETCH_AHEAD_SCALAR when each row it gathers is one double
   (lower/prefetch.rs); it changes no value. A macro, not a function: a
   compiler takes a function whose only effect is a prefetch for one
   without effects and drops its calls. */
#ifndef ATL_PREFETCH_AHEAD
#define ATL_PREFETCH_AHEAD 16
#endif
#ifndef ATL_PREFETCH_AHEAD_SCALAR
#define ATL_PREFETCH_AHEAD_SCALAR 32
#endif
#if defined(__GNUC__) || defined(__clang__)
#define ATL_PREFETCH(p) __builtin_prefetch(p)
#else
#define ATL_PREFETCH(p) ((void)(p))
#endif
/* Does a tensor of rows rows of n doubles, gathered by a loop over stored
   coordinates, span at least ATL_PREFETCH_MIN_BYTES? Smaller ones stay in
   the caches, and the loop does not prefetch them (lower/prefetch.rs). */
#ifndef ATL_PREFETCH_MIN_BYTES
#define ATL_PREFETCH_MIN_BYTES (1 << 20)
#endif
#define ATL_PREFETCH_WORTH(rows, n) ((double)(rows) * (double)(n) * 8.0 >= (double)(ATL_PREFETCH_MIN_BYTES))
#define ATL_PREFETCH_ROW(p, n) do { \
    const double *atlv_pf = (p); \
    const int64_t atlv_pn = (n); \
    ATL_PREFETCH(atlv_pf); \
    for (int64_t atlv_o = 8; atlv_o < atlv_pn - 1; atlv_o += 8) ATL_PREFETCH(atlv_pf + atlv_o); \
    if (atlv_pn > 1) ATL_PREFETCH(atlv_pf + atlv_pn - 1); \
  } while (0)
/* The position of the tuple prefix idx[0 .. n) (n >= 1, idx[0] within
   the first dimension when level 0 is dense), or -1 if no tuple has it. */
static inline int64_t atlh_rel_at(const int64_t *r, int n, const int64_t *idx) {
  int l = 0;
  int64_t p = 0;
  if (r[0] >= 2) { p = idx[0]; l = 1; }
  for (; l < n && p >= 0; l++) {
    const int64_t *pos = ATL_RPOS(r, l);
    p = atlh_find(ATL_RCRD(r, l), pos[p], pos[p + 1], idx[l]);
  }
  return p;
}
/* Every tuple of r below position p of level l, its row-major position
   in a dense array of dimensions dims so far at, set to 1.0 in mask. */
static ATL_MAYBE_UNUSED void atlh_rel_mask_walk(const int64_t *r, int64_t l, int64_t p, int64_t at, const int64_t *dims, double *mask) {
  if (l == r[0]) { mask[at] = 1.0; return; }
  const int64_t *pos = ATL_RPOS(r, l), *crd = ATL_RCRD(r, l);
  for (int64_t q = pos[p]; q < pos[p + 1]; q++) atlh_rel_mask_walk(r, l + 1, q, at * dims[l] + crd[q], dims, mask);
}
/* The membership of r (dimensions dims) as a dense array of 0.0 and 1.0,
   for loops that test every point: mask must be zero filled. */
static ATL_MAYBE_UNUSED void atlh_rel_mask(const int64_t *r, const int64_t *dims, double *mask) {
  if (r[0] >= 2) { for (int64_t p = 0; p < dims[0]; p++) atlh_rel_mask_walk(r, 1, p, p, dims, mask); }
  else atlh_rel_mask_walk(r, 0, 0, 0, dims, mask);
}
/* A membership test (counted as a predicate test). */
#define ATL_REL_HAS(r, n, ...) (ATL_TEST(atlh_rel_at((r), (n), (const int64_t[]){__VA_ARGS__}) >= 0))
/* The value at the tuple idx (within the dimensions) of a tensor stored
   by the pattern of r (v: one value per tuple, in the layout's order): a
   lookup, counted as one predicate test; 0 off the pattern. */
static inline double atlh_stored_at(const int64_t *r, const double *v, int n, const int64_t *idx) {
  const int64_t p = atlh_rel_at(r, n, idx);
  return ATL_TEST(p >= 0) ? v[p] : 0.0;
}
#define ATL_STORED_AT(r, v, n, ...) atlh_stored_at((r), (v), (n), (const int64_t[]){__VA_ARGS__})
/* The values of the row-major dense tensor (dimensions dims) at the tuples
   of r below position p of level l (flat: the offset of the coordinates
   above l), each into out at its tuple's position. */
static ATL_MAYBE_UNUSED void atlh_rel_gather(const int64_t *r, const int64_t *dims, int64_t l, int64_t p, int64_t flat, const double *dense, double *out) {
  const int64_t k = r[0];
  if (l == k) { out[p] = dense[flat]; return; }
  if (l == 0 && k >= 2) {
    for (int64_t i = 0; i < dims[0]; i++) atlh_rel_gather(r, dims, 1, i, i, dense, out);
    return;
  }
  const int64_t *pos = ATL_RPOS(r, l), *crd = ATL_RCRD(r, l);
  for (int64_t q = pos[p]; q < pos[p + 1]; q++) atlh_rel_gather(r, dims, l + 1, q, flat * dims[l] + crd[q], dense, out);
}
/* Append every tuple of r below position p of level l (the arguments above
   l in tup) to out, arguments permuted: out gets (t[perm[0]], ...). */
static void atlh_rel_walk(const int64_t *r, int64_t l, int64_t p, int64_t *tup, const int *perm, int64_t *out, int64_t *n) {
  const int64_t k = r[0];
  if (l == k) {
    for (int64_t j = 0; j < k; j++) out[*n * k + j] = tup[perm[j]];
    (*n)++;
    return;
  }
  const int64_t *pos = ATL_RPOS(r, l), *crd = ATL_RCRD(r, l);
  for (int64_t q = pos[p]; q < pos[p + 1]; q++) { tup[l] = crd[q]; atlh_rel_walk(r, l + 1, q, tup, perm, out, n); }
}
/* A layout built for one call (a relation read with its arguments
   permuted) lives in a buffer kept for the next call (one, of at most
   ATL_ARENA_KEEP doubles' bytes, as the arena is), so a call does not map
   and fault in fresh pages for it each time; calls on several threads at
   once take it in turn or allocate their own. The size (in int64_t) is
   stored in front. atlh_layout_new(n, kept): n int64_t from that buffer
   (kept) or malloc'd (a layout that outlives the call); atlh_layout_free
   gives it back the same way. */
#if defined(__GNUC__) || defined(__clang__)
static int64_t *atlh_layout_kept;
static ATL_MAYBE_UNUSED int64_t *atlh_layout_new(size_t n, int kept) {
  if (!kept) return (int64_t *)malloc(sizeof(int64_t) * n);
  int64_t *p = __atomic_exchange_n(&atlh_layout_kept, (int64_t *)NULL, __ATOMIC_ACQ_REL);
  if (p != NULL && (size_t)p[0] >= n) return p + 1;
  free(p);
  if (n > SIZE_MAX / sizeof(int64_t) - 1) return NULL;
  p = (int64_t *)malloc(sizeof(int64_t) * (n + 1));
  if (p == NULL) return NULL;
  p[0] = (int64_t)n;
  return p + 1;
}
static ATL_MAYBE_UNUSED void atlh_layout_free(int64_t *a, int kept) {
  if (a == NULL || !kept) { free(a); return; }
  int64_t *p = a - 1;
  if ((size_t)p[0] > ATL_ARENA_KEEP) { free(p); return; }
  free(__atomic_exchange_n(&atlh_layout_kept, p, __ATOMIC_ACQ_REL));
}
#else
static ATL_MAYBE_UNUSED int64_t *atlh_layout_new(size_t n, int kept) { (void)kept; return (int64_t *)malloc(sizeof(int64_t) * n); }
static ATL_MAYBE_UNUSED void atlh_layout_free(int64_t *a, int kept) { (void)kept; free(a); }
#endif
/* The transpose of r, of arity 2 (dims its rows and columns), every
   column's rows ascending, in a buffer of atlh_layout_new(., kept). Linear
   in the tuples and the dimensions. With many columns, in blocks of
   ATLH_TBLOCK columns so that no pass writes all over memory: the tuples,
   in order, go to their block's bucket (a bucket per block, written in
   streams), then each bucket, copied aside, is counted and scattered by
   column within its block's place in the result (which stays in cache).
   A bucket entry is a tuple's column within its block and its row, in 32
   bits when the rows fit in the bits left (up to 2^21 rows), in the upper
   half of the result's coordinates: block b's place ends at or before the
   first entry of the blocks after it, which are read later. Otherwise in
   64 bits, in the block's own place. Few columns, or more than 2^32 rows:
   one counting sort by column. NULL when out of memory. */
#define ATLH_TBLOCK_BITS 11
static ATL_MAYBE_UNUSED int64_t *atlh_rel_transpose(const int64_t *r, const int64_t *dims, int kept) {
  const int64_t nnz = r[1], rows = dims[0], cols = dims[1];
  const int64_t blocks = (cols + ((int64_t)1 << ATLH_TBLOCK_BITS) - 1) >> ATLH_TBLOCK_BITS;
  const int blocked = blocks > 4 && rows <= ((int64_t)1 << 32);
  const int narrow = rows <= ((int64_t)1 << (32 - ATLH_TBLOCK_BITS));
  int64_t *out = atlh_layout_new((size_t)(6 + cols + 1 + nnz), kept);
  int64_t *next = (int64_t *)malloc(sizeof(int64_t) * (size_t)((blocked ? blocks : cols) + 1));
  if (!out || !next) { atlh_layout_free(out, kept); free(next); return NULL; }
  const int64_t *pos = ATL_RPOS(r, 1), *crd = ATL_RCRD(r, 1);
  int64_t *tpos = out + 6, *tcrd = out + 6 + cols + 1;
  out[0] = 2; out[1] = nnz; out[2] = 0; out[3] = 0; out[4] = 6; out[5] = 6 + cols + 1;
  if (!blocked) {
    for (int64_t c = 0; c <= cols; c++) tpos[c] = 0;
    for (int64_t q = 0; q < nnz; q++) tpos[crd[q] + 1]++;
    for (int64_t c = 0; c < cols; c++) tpos[c + 1] += tpos[c];
    for (int64_t c = 0; c < cols; c++) next[c] = tpos[c];
    for (int64_t i = 0; i < rows; i++)
      for (int64_t q = pos[i]; q < pos[i + 1]; q++) tcrd[next[crd[q]]++] = i;
    free(next);
    return out;
  }
  /* next[b]: the start of block b's bucket, then its end as it fills. */
  const int64_t bmask = ((int64_t)1 << ATLH_TBLOCK_BITS) - 1;
  int64_t widest = 0;
  for (int64_t b = 0; b <= blocks; b++) next[b] = 0;
  for (int64_t q = 0; q < nnz; q++) next[(crd[q] >> ATLH_TBLOCK_BITS) + 1]++;
  for (int64_t b = 0; b < blocks; b++) { widest = atlh_max(widest, next[b + 1]); next[b + 1] += next[b]; }
  uint64_t *aside = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)(widest + 1));
  int64_t *count = (int64_t *)malloc(sizeof(int64_t) * (size_t)(bmask + 2));
  if (!aside || !count) { free(aside); free(count); free(next); atlh_layout_free(out, kept); return NULL; }
  tpos[0] = 0;
  if (narrow) {
    const int shift = 32 - ATLH_TBLOCK_BITS;
    const uint32_t rmask = ((uint32_t)1 << shift) - 1;
    uint32_t *bucket = (uint32_t *)tcrd + nnz, *side = (uint32_t *)aside;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t q = pos[i]; q < pos[i + 1]; q++)
        bucket[next[crd[q] >> ATLH_TBLOCK_BITS]++] = ((uint32_t)(crd[q] & bmask) << shift) | (uint32_t)i;
    for (int64_t b = 0, start = 0; b < blocks; b++) {
      const int64_t end = next[b], c0 = b << ATLH_TBLOCK_BITS, width = atlh_min(cols - c0, bmask + 1);
      for (int64_t q = start; q < end; q++) side[q - start] = bucket[q];
      for (int64_t c = 0; c <= width; c++) count[c] = 0;
      for (int64_t q = 0; q < end - start; q++) count[(side[q] >> shift) + 1]++;
      count[0] = start;
      for (int64_t c = 0; c < width; c++) { count[c + 1] += count[c]; tpos[c0 + c + 1] = count[c + 1]; }
      for (int64_t q = 0; q < end - start; q++) tcrd[count[side[q] >> shift]++] = (int64_t)(side[q] & rmask);
      start = end;
    }
  } else {
    uint64_t *bucket = (uint64_t *)tcrd;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t q = pos[i]; q < pos[i + 1]; q++)
        bucket[next[crd[q] >> ATLH_TBLOCK_BITS]++] = ((uint64_t)(crd[q] & bmask) << 32) | (uint64_t)i;
    for (int64_t b = 0, start = 0; b < blocks; b++) {
      const int64_t end = next[b], c0 = b << ATLH_TBLOCK_BITS, width = atlh_min(cols - c0, bmask + 1);
      for (int64_t q = start; q < end; q++) aside[q - start] = bucket[q];
      for (int64_t c = 0; c <= width; c++) count[c] = 0;
      for (int64_t q = 0; q < end - start; q++) count[(aside[q] >> 32) + 1]++;
      count[0] = start;
      for (int64_t c = 0; c < width; c++) { count[c + 1] += count[c]; tpos[c0 + c + 1] = count[c + 1]; }
      for (int64_t q = 0; q < end - start; q++) tcrd[count[aside[q] >> 32]++] = (int64_t)(aside[q] & 0xffffffffu);
      start = end;
    }
  }
  free(aside); free(count); free(next);
  return out;
}
#define ATLH_RADIX_BITS 10
/* The layout of r (dimensions dims) with its arguments permuted: a tuple t
   becomes (t[perm[0]], ..., t[perm[k - 1]]). Linear in the tuples and the
   dimensions: a least-significant-key-first radix sort of the permuted
   tuples (counting sorts that move whole tuples, so that every pass reads
   its input in order), skipping a key already ascending in the current
   order (as the first argument of r is before any pass); a transpose sorts
   by one key (a transpose of arity 2 is atlh_rel_transpose). In a buffer
   of atlh_layout_new(., kept); NULL when out of memory. */
static ATL_MAYBE_UNUSED int64_t *atlh_rel_permute(const int64_t *r, const int64_t *dims, const int *perm, int kept) {
  if (r[0] == 2 && perm[0] == 1) return atlh_rel_transpose(r, dims, kept);
  const int64_t k = r[0], nnz = r[1], start = k >= 2 ? 1 : 0;
  int64_t tup[16], n = 0, dmax = 1;
  for (int64_t j = 0; j < k; j++) if (dims[j] > dmax) dmax = dims[j];
  int64_t *u = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nnz * k + 1));
  int64_t *w = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nnz * k + 1));
  uint8_t *first = (uint8_t *)malloc((size_t)(nnz + 1));
  int64_t *cnt = (int64_t *)malloc(sizeof(int64_t) * (size_t)(dmax + 1));
  const int64_t d0 = k >= 1 ? dims[perm[0]] : 0;
  const int64_t cap = 2 + 2 * k + d0 + 1 + k * (2 * nnz + 1);
  int64_t *out = atlh_layout_new((size_t)cap, kept);
  if (!u || !w || !first || !cnt || !out || k > 16) {
    free(u); free(w); free(first); free(cnt); atlh_layout_free(out, kept);
    return NULL;
  }
  if (k >= 2) {
    for (int64_t i = 0; i < dims[0]; i++) { tup[0] = i; atlh_rel_walk(r, 1, i, tup, perm, u, &n); }
  } else if (k == 1) {
    atlh_rel_walk(r, 0, 0, tup, perm, u, &n);
  }
  for (int64_t m = k - 1; m >= 0; m--) { /* stable sort by key m */
    int64_t sorted = 1;
    for (int64_t i = 1; i < nnz && sorted; i++) sorted = u[(i - 1) * k + m] <= u[i * k + m];
    if (sorted) continue;
    const int64_t dm = dims[perm[m]];
    /* counting sorts by ATLH_RADIX_BITS-bit digits, lowest first: a pass
       writes to at most 2^ATLH_RADIX_BITS places at once, which stay in
       cache (a counting sort by the whole key writes all over memory). */
    for (int64_t shift = 0; shift == 0 || (dm - 1) >> shift > 0; shift += ATLH_RADIX_BITS) {
      const int64_t buckets = atlh_min(dm, (int64_t)1 << ATLH_RADIX_BITS), mask = ((int64_t)1 << ATLH_RADIX_BITS) - 1;
      for (int64_t x = 0; x <= buckets; x++) cnt[x] = 0;
      for (int64_t i = 0; i < nnz; i++) cnt[((u[i * k + m] >> shift) & mask) + 1]++;
      for (int64_t x = 0; x < buckets; x++) cnt[x + 1] += cnt[x];
      for (int64_t i = 0; i < nnz; i++) {
        int64_t *to = w + cnt[(u[i * k + m] >> shift) & mask]++ * k;
        for (int64_t j = 0; j < k; j++) to[j] = u[i * k + j];
      }
      int64_t *s = u; u = w; w = s;
    }
  }
  /* first[i]: the first argument where sorted tuple i differs from i - 1. */
  for (int64_t i = 0; i < nnz; i++) {
    int64_t m = 0;
    if (i > 0) while (m < k && u[i * k + m] == u[(i - 1) * k + m]) m++;
    first[i] = (uint8_t)m;
  }
  out[0] = k; out[1] = nnz;
  int64_t at = 2 + 2 * k, prev_nodes = 0;
  for (int64_t l = 0; l < 2 * k; l++) out[2 + l] = 0;
  for (int64_t l = start; l < k; l++) {
    const int64_t parents = l == start ? (start ? d0 : 1) : prev_nodes;
    int64_t *pos = out + at, c_prev = 0, c = 0;
    out[2 + 2 * l] = at;
    for (int64_t x = 0; x <= parents; x++) pos[x] = 0;
    at += parents + 1;
    int64_t *crd = out + at;
    out[3 + 2 * l] = at;
    for (int64_t i = 0; i < nnz; i++) {
      const int64_t *v = u + i * k;
      if (l > start && first[i] < l) c_prev++;
      if (first[i] <= l) {
        const int64_t parent = l == start ? (start ? v[0] : 0) : c_prev - 1;
        crd[c++] = v[l];
        pos[parent + 1]++;
      }
    }
    for (int64_t x = 0; x < parents; x++) pos[x + 1] += pos[x];
    at += c;
    prev_nodes = c;
  }
  free(u); free(w); free(first); free(cnt);
  return out;
}

/* Overflow checks: does c + k0*x0 + k1*x1 + ..., evaluated left to right
   (a term with k < 0 subtracted as |k|*x), stay in int64_t at every step
   for every x_j in [lo_j, hi_j]? t holds n triples k, lo, hi. Affine, so the
   extremes are at the ends of the ranges; an empty range means the form is
   never evaluated. */
__extension__ typedef __int128 atlh_i128;
/* ... and does its value stay in [min, max]? */
static inline int atlh_fits_in(int64_t c, int n, const int64_t *t, int64_t min, int64_t max) {
  for (int j = 0; j < n; j++) if (t[3 * j + 2] < t[3 * j + 1]) return 1;
  atlh_i128 lo = c, hi = c;
  for (int j = 0; j < n; j++) {
    const int64_t k = t[3 * j];
    const atlh_i128 m = k < 0 ? -(atlh_i128)k : (atlh_i128)k;
    const atlh_i128 a = m * t[3 * j + 1], b = m * t[3 * j + 2];
    if (a < INT64_MIN || b > INT64_MAX) return 0;
    if (k < 0) { lo -= b; hi -= a; } else { lo += a; hi += b; }
    if (lo < INT64_MIN || hi > INT64_MAX) return 0;
  }
  return lo >= min && hi <= max;
}
static inline int atlh_fits(int64_t c, int n, const int64_t *t) {
  return atlh_fits_in(c, n, t, INT64_MIN, INT64_MAX);
}
/* Does the form stay in int32_t? Then real() of it converts from 32 bits
   (lower/emit.rs), which vector code has. */
static inline int atlh_fits32(int64_t c, int n, const int64_t *t) {
  return atlh_fits_in(c, n, t, INT32_MIN, INT32_MAX);
}
/* The bounds of a loop's interior where its range guards hold (see
   lower/edges.rs): 128-bit, clamped into [lo, hi]. */
static inline atlh_i128 atlh_max128(atlh_i128 a, atlh_i128 b) { return a > b ? a : b; }
static inline atlh_i128 atlh_min128(atlh_i128 a, atlh_i128 b) { return a < b ? a : b; }
static inline int64_t atlh_clamp(atlh_i128 x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : (int64_t)x; }

/* Black boxes (their definitions follow, from the table of black boxes),
   exactly as atl-egg's evaluator; not inlined in a split
   body (ATL_SPLIT, see split.rs), where inlining thousands of them makes
   the C compiler slow. */
#ifdef ATL_SPLIT
#define ATL_BB static ATL_NOINLINE ATL_MAYBE_UNUSED
#else
#define ATL_BB static inline
#endif
"#;

fn stmts(out: &mut String, ss: &[Stmt], depth: usize) {
    let pad = "  ".repeat(depth);
    for s in ss {
        match s {
            Stmt::Line(l) => {
                let _ = writeln!(out, "{pad}{l}");
            }
            Stmt::Decl { ty, name, init } => {
                let _ = writeln!(out, "{pad}{ty} ATL_MAYBE_UNUSED {name} = {init};");
            }
            Stmt::For { var, lo, hi, body } => {
                let _ = writeln!(
                    out,
                    "{pad}for (int64_t {var} = {lo}; {var} < {hi}; {var}++) {{"
                );
                let _ = writeln!(out, "{pad}  ATL_ITER();");
                stmts(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::Chunks { var, body } => {
                // the schedule of a parallel loop: its iterations are not
                // the program's, so not counted
                let chunks = crate::lower::parallel::CHUNKS;
                let _ = writeln!(
                    out,
                    "{pad}for (int64_t {var} = 0; {var} < {chunks}; {var}++) {{"
                );
                stmts(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::Block(body) => {
                let _ = writeln!(out, "{pad}{{");
                stmts(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::If { cond, then, els } => {
                // a condition true at compile time is not a test
                // nor the choice of a schedule (lower/tile.rs)
                if cond == "1" || cond.starts_with("ATL_SCHEDULE(") {
                    let _ = writeln!(out, "{pad}if ({cond}) {{");
                } else {
                    let _ = writeln!(out, "{pad}if (ATL_TEST({cond})) {{");
                }
                stmts(out, then, depth + 1);
                if els.is_empty() {
                    let _ = writeln!(out, "{pad}}}");
                } else {
                    let _ = writeln!(out, "{pad}}} else {{");
                    stmts(out, els, depth + 1);
                    let _ = writeln!(out, "{pad}}}");
                }
            }
        }
    }
}

/// A dimension product as a C expression over the dimension locals.
fn dims_product(f: &Function, dims: &[Affine]) -> Vec<String> {
    dims.iter()
        .map(|d| {
            f.dims
                .iter()
                .find(|(_, a)| a == d)
                .map(|(n, _)| n.clone())
                .unwrap_or_else(|| "0".into())
        })
        .collect()
}

/// The part functions of a split body ([`split`]), after the macros that
/// make its top-level locals array elements.
fn parts(out: &mut String, f: &Function, sp: &split::Split, args: &[String]) {
    let (mut reals, mut ints) = (0, 0);
    for (n, real) in &sp.spilled {
        let (arr, k) = if *real {
            reals += 1;
            ("atlv_sd", reals - 1)
        } else {
            ints += 1;
            ("atlv_si", ints - 1)
        };
        let _ = writeln!(out, "#define {n} ({arr}[{k}])");
    }
    let names = arg_names(f);
    for (k, body) in sp.parts.iter().enumerate() {
        let mut all = args.to_vec();
        all.extend(PART_ARGS.iter().map(|a| a.to_string()));
        let _ = writeln!(
            out,
            "\nstatic ATL_NOINLINE int {}_part{k}({}) {{",
            f.name,
            all.join(", ")
        );
        for n in names.iter().chain(
            PART_NAMES
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .iter(),
        ) {
            let _ = writeln!(out, "  (void){n};");
        }
        for (j, (n, _)) in f.dims.iter().enumerate() {
            let _ = writeln!(out, "  const int64_t {n} = atlv_dims[{j}];\n  (void){n};");
        }
        for (j, s) in f.slots.iter().enumerate() {
            let _ = writeln!(
                out,
                "  double *{0} = atlv_slots[{j}];\n  (void){0};",
                s.cname
            );
        }
        stmts(out, body, 1);
        out.push_str("  return 0;\n}\n");
    }
}

/// The extra parameters of a part function, and their names.
const PART_ARGS: [&str; 5] = [
    "double *atlv_arena",
    "const int64_t *atlv_dims",
    "double *const *atlv_slots",
    "double *atlv_sd",
    "int64_t *atlv_si",
];
const PART_NAMES: [&str; 5] = [
    "atlv_arena",
    "atlv_dims",
    "atlv_slots",
    "atlv_sd",
    "atlv_si",
];

/// The C names of the function's parameters, permuted relation layouts
/// and outputs, in order.
fn arg_names(f: &Function) -> Vec<String> {
    f.params
        .iter()
        .map(|p| p.cname.clone())
        .chain(f.permuted.iter().map(|p| p.cname.clone()))
        .chain(f.outputs.iter().map(|(c, _, _)| c.clone()))
        .collect()
}

/// The main function's body for a split body: the arrays of the top-level
/// locals, the dimensions and slots for the parts, the calls in order.
fn part_calls(out: &mut String, f: &Function, sp: &split::Split) {
    let reals = sp.spilled.iter().filter(|(_, r)| *r).count();
    let ints = sp.spilled.len() - reals;
    let _ = writeln!(
        out,
        "  double *atlv_sd = (double *)calloc({}, sizeof(double));\n  int64_t *atlv_si = (int64_t *)calloc({}, sizeof(int64_t));",
        reals + 1,
        ints + 1
    );
    let _ = writeln!(
        out,
        "  if (atlv_sd == NULL || atlv_si == NULL) {{ free(atlv_sd); free(atlv_si); atlh_arena_give(atlv_arena); return {RET_ALLOCATION}; }}"
    );
    let dims: Vec<&str> = f.dims.iter().map(|(n, _)| n.as_str()).collect();
    let slots: Vec<&str> = f.slots.iter().map(|s| s.cname.as_str()).collect();
    let _ = writeln!(
        out,
        "  const int64_t atlv_dims[] = {{{}0}};\n  double *const atlv_slots[] = {{{}NULL}};\n  int atlv_rc = 0;",
        dims.iter().map(|d| format!("{d}, ")).collect::<String>(),
        slots.iter().map(|d| format!("{d}, ")).collect::<String>(),
    );
    let mut call = arg_names(f);
    call.extend(PART_NAMES.iter().map(|s| s.to_string()));
    for k in 0..sp.parts.len() {
        let _ = writeln!(
            out,
            "  if (atlv_rc == 0) atlv_rc = {}_part{k}({});",
            f.name,
            call.join(", ")
        );
    }
    out.push_str("  free(atlv_sd);\n  free(atlv_si);\n  atlh_arena_give(atlv_arena);\n  return atlv_rc;\n}\n");
}

/// A dimension (affine in sizes) as a C expression over the size
/// parameters, and its entry check.
pub(super) fn dim_form(a: &Affine, f: &Function) -> (String, IndexCheck) {
    let mut s = int_literal(a.constant);
    let mut check = IndexCheck {
        constant: a.constant,
        terms: vec![],
    };
    for (n, k) in &a.terms {
        let c = f
            .params
            .iter()
            .find(|p| p.kind == ParamC::Size && p.source == n.as_str())
            .map(|p| p.cname.clone())
            .unwrap_or_else(|| "0".into());
        let _ = write!(s, " + ({})*{c}", int_literal(*k));
        check.terms.push((*k, c.clone(), c));
    }
    (s, check)
}

/// The C call checking a form (see `atlh_fits`).
pub(super) fn check_call(c: &IndexCheck) -> String {
    let terms: Vec<String> = c
        .terms
        .iter()
        .map(|(k, lo, hi)| format!("{}, {lo}, {hi}", int_literal(*k)))
        .collect();
    if terms.is_empty() {
        return "1".into();
    }
    format!(
        "atlh_fits({}, {}, (const int64_t[]){{{}}})",
        int_literal(c.constant),
        c.terms.len(),
        terms.join(", ")
    )
}

fn c_type(k: &ParamC) -> &'static str {
    match k {
        ParamC::Size => "int64_t",
        ParamC::Real => "double",
        ParamC::Tensor(_) | ParamC::Stored { .. } => "const double *",
        ParamC::Relation(_) => "const int64_t *",
    }
}

/// The C source of a lowered program.
pub fn emit(f: &Function, source_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "/* Generated by atl-egg from the ATL program `{}`. */",
        source_name.replace("*/", "* /")
    );
    let split = split::split(&f.body);
    if split.is_some() {
        out += "#define ATL_SPLIT 1\n";
    }
    out += PRELUDE;
    if super::gemm::used(&f.body) {
        out += super::gemm::GEMM;
    }
    out += &crate::front::blackbox::c_definitions("ATL_BB");
    let mut args: Vec<String> = f
        .params
        .iter()
        .map(|p| {
            format!(
                "{}{}{}",
                c_type(&p.kind),
                if matches!(
                    p.kind,
                    ParamC::Tensor(_) | ParamC::Relation(_) | ParamC::Stored { .. }
                ) {
                    ""
                } else {
                    " "
                },
                p.cname
            )
        })
        .collect();
    let public_args = args.clone();
    args.extend(
        f.permuted
            .iter()
            .map(|p| format!("const int64_t *{}", p.cname)),
    );
    args.extend(f.outputs.iter().map(|(c, _, _)| format!("double *{c}")));
    if let Some(sp) = &split {
        parts(&mut out, f, sp, &args);
    }
    // With permuted relation layouts the body is a function of its own,
    // called by the public one once they are built.
    let header = if f.permuted.is_empty() {
        format!("int {}", f.name)
    } else {
        format!("static int {}_body", f.name)
    };
    let _ = writeln!(
        out,
        "\n{header}({}) {{",
        if args.is_empty() {
            "void".into()
        } else {
            args.join(", ")
        }
    );
    entry_checks(&mut out, f);
    arena(&mut out, f);
    match &split {
        None => {
            stmts(&mut out, &f.body, 1);
            out += "  atlh_arena_give(atlv_arena);\n  return 0;\n}\n";
        }
        Some(sp) => {
            part_calls(&mut out, f, sp);
            for (n, _) in &sp.spilled {
                let _ = writeln!(out, "#undef {n}");
            }
        }
    }
    if !f.permuted.is_empty() {
        permuting_entry(&mut out, f, &public_args);
    }
    packed_entry(&mut out, f);
    out += &super::prepared::emit(f);
    if f.params
        .iter()
        .any(|p| matches!(&p.kind, ParamC::Relation(d) if d.len() == 2))
    {
        out += PAIRS_LAYOUT;
    }
    out += THREADS;
    out
}

/// The start of the body: parameters marked used, the operation counters
/// reset, then every size, dimension and index form checked (return codes
/// for a negative dimension and an index overflow).
fn entry_checks(out: &mut String, f: &Function) {
    for p in &f.params {
        let _ = writeln!(out, "  (void){};", p.cname);
    }
    for p in &f.permuted {
        let _ = writeln!(out, "  (void){};", p.cname);
    }
    *out += "#ifdef ATL_COUNT_OPS\n  for (int atlv_k = 0; atlv_k < 5; atlv_k++) atlpacked_ops[atlv_k] = 0;\n#endif\n";
    for p in &f.params {
        if p.kind == ParamC::Size {
            let _ = writeln!(
                out,
                "  if ({} < 0) return {RET_NEGATIVE_DIMENSION};",
                p.cname
            );
        }
    }
    for (n, a) in &f.dims {
        let (value, check) = dim_form(a, f);
        let _ = writeln!(
            out,
            "  if (!{}) return {RET_INDEX_OVERFLOW};",
            check_call(&check)
        );
        let _ = writeln!(out, "  const int64_t {n} = {value};");
        let _ = writeln!(out, "  if ({n} < 0) return {RET_NEGATIVE_DIMENSION};");
    }
    for c in &f.checks {
        let _ = writeln!(
            out,
            "  if (!{}) return {RET_INDEX_OVERFLOW};",
            check_call(c)
        );
    }
}

/// The arena: one block per call, one slot per intermediate, its size
/// computed with overflow checks.
fn arena(out: &mut String, f: &Function) {
    *out += "  int64_t atlv_total = 0;\n";
    for s in &f.slots {
        let _ = writeln!(out, "  const int64_t atlv_at_{} = atlv_total;", s.cname);
        let _ = writeln!(out, "  {{\n    int64_t atlv_n = 1;");
        for d in dims_product(f, &s.dims) {
            let _ = writeln!(
                out,
                "    if ({d} != 0 && atlv_n > INT64_MAX / {d}) return {RET_OVERFLOW};\n    atlv_n *= {d};"
            );
        }
        let _ = writeln!(
            out,
            "    if (atlv_total > INT64_MAX - atlv_n) return {RET_OVERFLOW};\n    atlv_total += atlv_n;\n  }}"
        );
    }
    let _ = writeln!(
        out,
        "  if ((uint64_t)atlv_total > SIZE_MAX / sizeof(double)) return {RET_OVERFLOW};"
    );
    let _ = writeln!(
        out,
        "  double *atlv_arena = atlv_total > 0 ? atlh_arena_take((size_t)atlv_total) : NULL;"
    );
    let _ = writeln!(
        out,
        "  if (atlv_total > 0 && atlv_arena == NULL) return {RET_ALLOCATION};"
    );
    for s in &f.slots {
        let _ = writeln!(out, "  double *{0} = atlv_arena + atlv_at_{0};", s.cname);
    }
}

/// The arguments of `f`'s parameters, in order, read from a packed
/// entry's arrays: the `k`-th size as `size(k, its C name)`, reals and
/// tensors from `re`, the `k`-th relation as `relation(k)`.
pub(super) fn packed_args(
    f: &Function,
    size: impl Fn(usize, &str) -> String,
    relation: impl Fn(usize) -> String,
) -> Vec<String> {
    let (mut ns, mut nr, mut nrel) = (0, 0, 0);
    let mut call = vec![];
    for p in &f.params {
        call.push(match p.kind {
            ParamC::Size => {
                ns += 1;
                size(ns - 1, &p.cname)
            }
            ParamC::Real => {
                nr += 1;
                format!("re[{}][0]", nr - 1)
            }
            ParamC::Tensor(_) | ParamC::Stored { .. } => {
                nr += 1;
                format!("re[{}]", nr - 1)
            }
            ParamC::Relation(_) => {
                nrel += 1;
                relation(nrel - 1)
            }
        });
    }
    call
}

/// `atlpacked_entry`: the function called with its arguments packed in
/// arrays by kind (sizes, reals and tensors, relations, outputs).
fn packed_entry(out: &mut String, f: &Function) {
    let mut call = packed_args(f, |k, _| format!("sz[{k}]"), |k| format!("rel[{k}]"));
    for k in 0..f.outputs.len() {
        call.push(format!("out[{k}]"));
    }
    let _ = writeln!(
        out,
        "\nint atlpacked_entry(const int64_t *sz, const double *const *re, const int64_t *const *rel, double *const *out) {{\n  (void)sz; (void)re; (void)rel; (void)out;\n  return {}({});\n}}",
        f.name,
        call.join(", ")
    );
}

/// `atlpacked_pairs_layout(pairs, nnz, rows, cols, out)`, in a library
/// with a relation of two arguments: the compressed layout (CSR) of `nnz`
/// pairs (row-major `int64_t[nnz][2]`) in one pass, for callers holding
/// tuples (the ctypes loader). Writes `7 + rows + nnz` integers to `out`
/// and returns 0 when every pair is in range and the pairs are sorted and
/// distinct; otherwise returns 1 (a coordinate out of range), 2 (a pair
/// below the one before it) or 3 (a pair given twice), with the pair's
/// place in `out[0]`, and the caller checks (or sorts) them its own way.
const PAIRS_LAYOUT: &str = "
int64_t atlpacked_pairs_layout(const int64_t *pairs, int64_t nnz, int64_t rows, int64_t cols, int64_t *out) {
  int64_t *pos = out + 7;
  int64_t *crd = out + 7 + rows;
  int64_t r = 0, prev = -1;
  for (int64_t q = 0; q < nnz; q++) {
    const int64_t a = pairs[2 * q], b = pairs[2 * q + 1];
    if (a < 0 || a >= rows || b < 0 || b >= cols) { out[0] = q; return 1; }
    if (a < r || (a == r && b < prev)) { out[0] = q; return 2; }
    if (a == r && b == prev) { out[0] = q; return 3; }
    while (r < a) pos[r++] = q;
    crd[q] = b;
    prev = b;
  }
  while (r < rows) pos[r++] = nnz;
  out[0] = 2; out[1] = nnz; out[2] = 0; out[3] = 0; out[4] = 6; out[5] = 7 + rows; out[6] = 0;
  return 0;
}
";

/// `atlpacked_threads(n)`: later calls from the calling thread run their
/// parallel loops on `n` threads (`n <= 0`, or a build without OpenMP:
/// no change). The default is `OMP_NUM_THREADS`, else one per core.
const THREADS: &str = "\nvoid atlpacked_threads(int n) {\n#ifdef _OPENMP\n  if (n > 0) omp_set_num_threads(n);\n#else\n  (void)n;\n#endif\n}\n";

/// The public function of a body that reads permuted relation layouts:
/// it checks the relations' dimensions, builds each layout (linear in the
/// tuples), calls the body and frees them.
fn permuting_entry(out: &mut String, f: &Function, public_args: &[String]) {
    let mut args = public_args.to_vec();
    args.extend(f.outputs.iter().map(|(c, _, _)| format!("double *{c}")));
    let _ = writeln!(out, "\nint {}({}) {{", f.name, args.join(", "));
    let mut built = vec![];
    for p in &f.permuted {
        let mut dims = vec![];
        for d in &p.dims {
            let (value, check) = dim_form(d, f);
            let _ = writeln!(
                out,
                "  if (!{}) return {RET_INDEX_OVERFLOW};",
                check_call(&check)
            );
            dims.push(format!("({value})"));
        }
        let ds = format!("atlv_dims_{}", p.cname);
        let _ = writeln!(
            out,
            "  const int64_t {ds}[] = {{{}}};\n  for (int atlv_k = 0; atlv_k < {}; atlv_k++) if ({ds}[atlv_k] < 0) {{ {}return {RET_NEGATIVE_DIMENSION}; }}",
            dims.join(", "),
            dims.len(),
            built
                .iter()
                .map(|b| format!("atlh_layout_free({b}, 1); "))
                .collect::<String>()
        );
        let perm: Vec<String> = p.perm.iter().map(|k| k.to_string()).collect();
        let _ = writeln!(
            out,
            "  int64_t *{} = atlh_rel_permute({}, {ds}, (const int[]){{{}}}, 1);",
            p.cname,
            p.of,
            perm.join(", ")
        );
        built.push(p.cname.clone());
        let _ = writeln!(
            out,
            "  if ({} == NULL) {{ {}return {RET_ALLOCATION}; }}",
            p.cname,
            built
                .iter()
                .map(|b| format!("atlh_layout_free({b}, 1); "))
                .collect::<String>()
        );
    }
    let _ = writeln!(
        out,
        "  const int atlv_rc = {}_body({});",
        f.name,
        arg_names(f).join(", ")
    );
    for b in &built {
        let _ = writeln!(out, "  atlh_layout_free({b}, 1);");
    }
    out.push_str("  return atlv_rc;\n}\n");
}

fn dims_json(dims: &[Affine]) -> serde_json::Value {
    serde_json::Value::Array(
        dims.iter()
            .map(|d| serde_json::Value::String(d.to_string()))
            .collect(),
    )
}

/// The manifest: the C function's name, parameters (with their shapes in
/// terms of the sizes), outputs and return codes.
pub fn manifest(f: &Function) -> serde_json::Value {
    let params: Vec<serde_json::Value> = f
        .params
        .iter()
        .map(|p| {
            let (kind, shape) = match &p.kind {
                ParamC::Size => ("size", vec![]),
                ParamC::Real => ("real", vec![]),
                ParamC::Tensor(d) => ("tensor", d.clone()),
                ParamC::Relation(d) => ("relation", d.clone()),
                ParamC::Stored { dims, .. } => ("stored", dims.clone()),
            };
            let mut j = serde_json::json!({
                "c_name": p.cname, "source": p.source, "kind": kind,
                "c_type": c_type(&p.kind), "shape": dims_json(&shape),
            });
            if let ParamC::Stored { by, .. } = &p.kind {
                j["stored_by"] = by.as_str().into();
            }
            j
        })
        .collect();
    let outputs: Vec<serde_json::Value> = f
        .outputs
        .iter()
        .enumerate()
        .map(|(k, (c, path, d))| {
            let mut j = serde_json::json!({"c_name": c, "leaf": path, "c_type": "double *", "shape": dims_json(d)});
            if let Some((_, by)) = f.stored_outputs.iter().find(|(o, _)| *o == k) {
                j["stored_by"] = by.as_str().into();
            }
            j
        })
        .collect();
    let mut m = serde_json::json!({
        "function": f.name,
        "packed_entry": "atlpacked_entry",
        "params": params,
        "outputs": outputs,
        "returns": {
            "0": "success",
            "1": "a size or dimension is negative",
            "2": "allocation failure",
            "3": "the intermediates' size overflows 64 bits",
            "4": INDEX_OVERFLOW_MESSAGE,
            "5": super::prepared::PREPARED_MESSAGE,
        },
        "count_ops": "compile with -DATL_COUNT_OPS: uint64_t atlpacked_ops[5] = additions (max and min included), multiplications, black-box calls, loop iterations, predicate tests of the last call",
    });
    if f.params
        .iter()
        .any(|p| matches!(p.kind, ParamC::Relation(_)))
    {
        m["prepare"] = "atlpacked_prepare".into();
        m["prepared_entry"] = "atlpacked_entry_prepared".into();
        m["prepared_free"] = "atlpacked_prepared_free".into();
    }
    m
}
