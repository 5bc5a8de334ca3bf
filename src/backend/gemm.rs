//! The C of the contraction kernel `atlh_gemm`, which the lowering calls
//! for a matrix product at any strides (`lower/contract.rs`); emitted after
//! the prelude only into programs that call it.
//!
//! The schedule is BLIS's: for each block of `KC` rows of `B` (and at most
//! `NC` columns) the block is packed into panels of `NR` columns; the rows
//! of `A` are cut into blocks of `MC` rows, each packed into panels of
//! `MR` rows by the thread that works on it, and an `MR×NR` micro-kernel
//! keeps its accumulators in vector registers while it runs down `k`:
//! 8×24 in AVX-512 intrinsics (24 zmm accumulators, per `k` three loads
//! of `B`, eight broadcasts of `A` from memory and 24 fused multiply-adds;
//! the shape measured fastest, docs/performance.md), 6×8 in AVX2 and FMA
//! intrinsics (12 ymm accumulators held in named variables), otherwise GCC
//! and Clang vector extensions (6×8 with AVX, 4×4 otherwise). A full tile of
//! `C` whose columns are unit-stride is updated from the registers. Work items (a block of rows times 16 panels of
//! columns) are shared by the OpenMP threads, unless the call already runs
//! in a parallel region or the product is small. Each element of `C` is the
//! sum of its `K` products, added in order within a block of `k` (with
//! fused multiply-adds where the target has them: one rounding per term
//! instead of two) and the blocks added in order: the value does not
//! depend on the number of threads. Remainders are padded with zeros in
//! the packed panels and never stored. A narrow product (at most 16
//! columns, under AVX-512) packs only `B`, as rows of 16, and holds 12 rows
//! of `C` in registers while reading `A` in place, its sums in the same
//! order. A small product (or a failed allocation) runs the plain loop nest. The counting build counts what
//! the cost model counts: `M·N·K` multiplications and `M·N·(K-1)`
//! additions.

/// The kernel's C text.
pub(crate) const GEMM: &str = r#"
/* Contractions (see src/backend/gemm.rs): C[i][j] = sum_k A[i][k] * B[k][j]
   for i < M, j < N, k < K, every operand at its own strides. */
#if defined(__AVX512F__)
#define ATL_VL 8
#define ATL_GEMM_MR 8
#define ATL_GEMM_NR 24
#elif defined(__AVX2__) && defined(__FMA__)
#define ATL_VL 4
#define ATL_GEMM_MR 6
#define ATL_GEMM_NR 8
#elif defined(__AVX__)
#define ATL_VL 4
#define ATL_GEMM_MR 6
#define ATL_GEMM_NR 8
#else
#define ATL_VL 2
#define ATL_GEMM_MR 4
#define ATL_GEMM_NR 4
#endif
#define ATL_GEMM_KC 256
#define ATL_GEMM_PF 8
#define ATL_GEMM_MC (8 * ATL_GEMM_MR)
#define ATL_GEMM_NG (16 * ATL_GEMM_NR)
#define ATL_GEMM_NC 4096
#define ATL_GEMM_SMALL 16384.0
#ifndef ATL_GEMM_PAR_WORK
#define ATL_GEMM_PAR_WORK 1048576.0
#endif
#if defined(__FMA__) && defined(__clang__)
#define ATL_GEMM_KERNEL static
#define ATL_GEMM_FUSE _Pragma("clang fp contract(fast)")
#elif defined(__FMA__) && defined(__GNUC__)
#define ATL_GEMM_KERNEL __attribute__((optimize("fp-contract=fast"))) static
#define ATL_GEMM_FUSE
#else
#define ATL_GEMM_KERNEL static
#define ATL_GEMM_FUSE
#endif
#define ATL_GEMM_UNROLL _Pragma("GCC unroll 32")
typedef double atlh_vd __attribute__((vector_size(ATL_VL * 8), aligned(8)));

/* The MR x NR tile at c (rows at stride csi, columns at stride csj; mr x nr
   of it inside C) plus, unless first, what it holds. A full tile whose
   columns are unit-stride is written from the registers. */
#define ATL_GEMM_STORE(ACC)                                                                            \
  do {                                                                                                 \
    if (mr == ATL_GEMM_MR && nr == ATL_GEMM_NR && csj == 1) {                                          \
      ATL_GEMM_UNROLL                                                                                  \
      for (int r = 0; r < ATL_GEMM_MR; r++)                                                            \
        ATL_GEMM_UNROLL                                                                                \
        for (int s = 0; s < ATL_GEMM_NR / ATL_VL; s++) {                                               \
          double *p = c + r * csi + s * ATL_VL;                                                        \
          atlh_vd v = ACC[r][s];                                                                       \
          if (!first) {                                                                                \
            atlh_vd old;                                                                               \
            __builtin_memcpy(&old, p, sizeof old);                                                     \
            v = old + v;                                                                               \
          }                                                                                            \
          __builtin_memcpy(p, &v, sizeof v);                                                           \
        }                                                                                              \
    } else {                                                                                           \
      double out[ATL_GEMM_MR][ATL_GEMM_NR];                                                            \
      ATL_GEMM_UNROLL                                                                                  \
      for (int r = 0; r < ATL_GEMM_MR; r++)                                                            \
        ATL_GEMM_UNROLL                                                                                \
        for (int s = 0; s < ATL_GEMM_NR / ATL_VL; s++) {                                               \
          atlh_vd v = ACC[r][s];                                                                       \
          __builtin_memcpy(&out[r][s * ATL_VL], &v, sizeof v);                                         \
        }                                                                                              \
      for (int64_t r = 0; r < mr; r++)                                                                 \
        for (int64_t s = 0; s < nr; s++) {                                                             \
          double *p = c + r * csi + s * csj;                                                           \
          *p = first ? out[r][s] : *p + out[r][s];                                                     \
        }                                                                                              \
    }                                                                                                  \
  } while (0)

#if defined(__AVX512F__)
#include <immintrin.h>
/* AVX-512: the accumulators are MR x nv zmm registers (nv = 3 for a full
   panel of NR columns; 1 or 2 for a last panel of at most 8 or 16, which
   then runs no multiply-adds on padding); per k, nv loads of the B panel,
   MR broadcasts of A from memory, one fused multiply-add each. The tile
   of C is prefetched before k runs (its lines are then in cache when the
   sums are added to it); unit-stride columns are stored from the
   registers, through masks for a part of a tile. */
static inline __attribute__((always_inline)) void atlh_gemm_kernel_nv(int64_t kc, const double *restrict ap,
                                                                      const double *restrict bp, double *c,
                                                                      int64_t csi, int64_t csj, int64_t mr,
                                                                      int64_t nr, int first, const int nv) {
  __m512d acc[ATL_GEMM_MR][ATL_GEMM_NR / 8];
ATL_GEMM_UNROLL
  for (int r = 0; r < ATL_GEMM_MR; r++)
ATL_GEMM_UNROLL
    for (int s = 0; s < nv; s++) acc[r][s] = _mm512_setzero_pd();
  if (csj == 1)
    for (int64_t r = 0; r < mr; r++) {
ATL_GEMM_UNROLL
      for (int s = 0; s < nv; s++) _mm_prefetch((const char *)(c + r * csi + 8 * s), _MM_HINT_T0);
      _mm_prefetch((const char *)(c + r * csi + nr - 1), _MM_HINT_T0);
    }
  /* Unrolled by 4: 5-7% faster on a 1024x512x512 product (docs/performance.md). */
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; k++) {
    const double *a = ap + k * ATL_GEMM_MR, *b = bp + k * ATL_GEMM_NR;
    __m512d bv[ATL_GEMM_NR / 8];
ATL_GEMM_UNROLL
    for (int s = 0; s < nv; s++) bv[s] = _mm512_loadu_pd(b + 8 * s);
    _mm_prefetch((const char *)(a + ATL_GEMM_PF * ATL_GEMM_MR), _MM_HINT_T0);
ATL_GEMM_UNROLL
    for (int r = 0; r < ATL_GEMM_MR; r++) {
      const __m512d av = _mm512_set1_pd(a[r]);
ATL_GEMM_UNROLL
      for (int s = 0; s < nv; s++) acc[r][s] = _mm512_fmadd_pd(av, bv[s], acc[r][s]);
    }
  }
  if (csj == 1) {
    __mmask8 m[ATL_GEMM_NR / 8];
ATL_GEMM_UNROLL
    for (int s = 0; s < nv; s++) {
      const int64_t w = nr - 8 * s;
      m[s] = (__mmask8)(w >= 8 ? 0xff : w <= 0 ? 0 : (1u << w) - 1u);
    }
ATL_GEMM_UNROLL
    for (int r = 0; r < ATL_GEMM_MR; r++) {
      if (r >= mr) break;
      double *p = c + r * csi;
ATL_GEMM_UNROLL
      for (int s = 0; s < nv; s++) {
        __m512d v = acc[r][s];
        if (!first) v = _mm512_add_pd(_mm512_maskz_loadu_pd(m[s], p + 8 * s), v);
        _mm512_mask_storeu_pd(p + 8 * s, m[s], v);
      }
    }
    return;
  }
  double out[ATL_GEMM_MR][ATL_GEMM_NR];
ATL_GEMM_UNROLL
  for (int r = 0; r < ATL_GEMM_MR; r++)
ATL_GEMM_UNROLL
    for (int s = 0; s < nv; s++) _mm512_storeu_pd(&out[r][8 * s], acc[r][s]);
  for (int64_t r = 0; r < mr; r++)
    for (int64_t s = 0; s < nr; s++) {
      double *p = c + r * csi + s * csj;
      *p = first ? out[r][s] : *p + out[r][s];
    }
}

static void atlh_gemm_kernel(int64_t kc, const double *restrict ap, const double *restrict bp, double *c,
                             int64_t csi, int64_t csj, int64_t mr, int64_t nr, int first) {
  if (nr > 16)
    atlh_gemm_kernel_nv(kc, ap, bp, c, csi, csj, mr, nr, first, 3);
  else if (nr > 8)
    atlh_gemm_kernel_nv(kc, ap, bp, c, csi, csj, mr, nr, first, 2);
  else
    atlh_gemm_kernel_nv(kc, ap, bp, c, csi, csj, mr, nr, first, 1);
}
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
/* AVX2 with FMA: the 6 x 8 tile's accumulators are twelve named ymm
   registers, stored from the registers (GCC keeps an array of them, or the
   generic path's, in memory: 7.5 against 17.5 GFLOP/s on a 512^3 product,
   docs/performance.md); per k, two loads of the B panel, six broadcasts of
   A from memory, one fused multiply-add each, in the order of the generic
   path. */
static void atlh_gemm_kernel(int64_t kc, const double *restrict ap, const double *restrict bp, double *c,
                             int64_t csi, int64_t csj, int64_t mr, int64_t nr, int first) {
  __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256d c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; k++) {
    const double *a = ap + k * 6, *b = bp + k * 8;
    const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
    __m256d av;
#define ATLH_ROW(R)                                                                                    \
  av = _mm256_broadcast_sd(a + R);                                                                     \
  c##R##0 = _mm256_fmadd_pd(av, b0, c##R##0);                                                          \
  c##R##1 = _mm256_fmadd_pd(av, b1, c##R##1);
    ATLH_ROW(0) ATLH_ROW(1) ATLH_ROW(2) ATLH_ROW(3) ATLH_ROW(4) ATLH_ROW(5)
#undef ATLH_ROW
  }
  if (mr == 6 && nr == 8 && csj == 1) {
#define ATLH_ROW(R)                                                                                    \
  do {                                                                                                 \
    double *p = c + R * csi;                                                                           \
    if (!first) {                                                                                      \
      c##R##0 = _mm256_add_pd(_mm256_loadu_pd(p), c##R##0);                                            \
      c##R##1 = _mm256_add_pd(_mm256_loadu_pd(p + 4), c##R##1);                                        \
    }                                                                                                  \
    _mm256_storeu_pd(p, c##R##0);                                                                      \
    _mm256_storeu_pd(p + 4, c##R##1);                                                                  \
  } while (0);
    ATLH_ROW(0) ATLH_ROW(1) ATLH_ROW(2) ATLH_ROW(3) ATLH_ROW(4) ATLH_ROW(5)
#undef ATLH_ROW
    return;
  }
  double out[6][8];
#define ATLH_ROW(R)                                                                                    \
  _mm256_storeu_pd(out[R], c##R##0);                                                                   \
  _mm256_storeu_pd(out[R] + 4, c##R##1);
  ATLH_ROW(0) ATLH_ROW(1) ATLH_ROW(2) ATLH_ROW(3) ATLH_ROW(4) ATLH_ROW(5)
#undef ATLH_ROW
  for (int64_t r = 0; r < mr; r++)
    for (int64_t s = 0; s < nr; s++) {
      double *p = c + r * csi + s * csj;
      *p = first ? out[r][s] : *p + out[r][s];
    }
}
#else
ATL_GEMM_KERNEL void atlh_gemm_kernel(int64_t kc, const double *restrict ap, const double *restrict bp,
                                      double *c, int64_t csi, int64_t csj, int64_t mr, int64_t nr, int first) {
  ATL_GEMM_FUSE
  atlh_vd acc[ATL_GEMM_MR][ATL_GEMM_NR / ATL_VL];
  ATL_GEMM_UNROLL
  for (int r = 0; r < ATL_GEMM_MR; r++)
    ATL_GEMM_UNROLL
    for (int s = 0; s < ATL_GEMM_NR / ATL_VL; s++) acc[r][s] = (atlh_vd){0};
  for (int64_t k = 0; k < kc; k++) {
    const double *a = ap + k * ATL_GEMM_MR, *b = bp + k * ATL_GEMM_NR;
    atlh_vd bv[ATL_GEMM_NR / ATL_VL];
    ATL_GEMM_UNROLL
    for (int s = 0; s < ATL_GEMM_NR / ATL_VL; s++) bv[s] = *(const atlh_vd *)(b + s * ATL_VL);
    ATL_GEMM_UNROLL
    for (int r = 0; r < ATL_GEMM_MR; r++) {
      const atlh_vd av = a[r] - (atlh_vd){0};
      ATL_GEMM_UNROLL
      for (int s = 0; s < ATL_GEMM_NR / ATL_VL; s++) acc[r][s] += av * bv[s];
    }
  }
  ATL_GEMM_STORE(acc);
}
#endif

/* The rows [ic, ic + mc) of A, columns [pc, pc + kc), as panels of MR rows
   (k-major, zero padded). Full panels are copied without tests, a k at a
   time across all the panels when the rows are unit-stride (one
   contiguous run of A per k), else a panel at a time. */
static void atlh_gemm_pack_a(double *ap, const double *A, int64_t asi, int64_t ask, int64_t ic, int64_t mc,
                             int64_t pc, int64_t kc) {
  const int64_t full = mc / ATL_GEMM_MR * ATL_GEMM_MR;
  if (asi == 1)
    for (int64_t k = 0; k < kc; k++) {
      const double *src = A + ic + (pc + k) * ask;
      for (int64_t ir = 0; ir < full; ir += ATL_GEMM_MR) {
        double *p = ap + ir * kc + k * ATL_GEMM_MR;
        ATL_GEMM_UNROLL
        for (int64_t r = 0; r < ATL_GEMM_MR; r++) p[r] = src[ir + r];
      }
    }
  else
    for (int64_t ir = 0; ir < full; ir += ATL_GEMM_MR)
      for (int64_t k = 0; k < kc; k++) {
        const double *src = A + (ic + ir) * asi + (pc + k) * ask;
        double *p = ap + ir * kc + k * ATL_GEMM_MR;
        ATL_GEMM_UNROLL
        for (int64_t r = 0; r < ATL_GEMM_MR; r++) p[r] = src[r * asi];
      }
  if (full < mc) {
    double *p = ap + full * kc;
    const int64_t mr = mc - full;
    for (int64_t k = 0; k < kc; k++) {
      const double *src = A + (ic + full) * asi + (pc + k) * ask;
      for (int64_t r = 0; r < ATL_GEMM_MR; r++) p[k * ATL_GEMM_MR + r] = r < mr ? src[r * asi] : 0.0;
    }
  }
}

/* The rows [pc, pc + kc) of B, columns [jc, jc + nc), as panels of NR
   columns (k-major, zero padded, kst >= kc rows apart), in the order of
   pack_a. */
static void atlh_gemm_pack_b(double *bp, const double *B, int64_t bsk, int64_t bsj, int64_t pc, int64_t kc,
                             int64_t kst, int64_t jc, int64_t nc) {
  const int64_t full = nc / ATL_GEMM_NR * ATL_GEMM_NR;
  if (bsj == 1)
    for (int64_t k = 0; k < kc; k++) {
      const double *src = B + (pc + k) * bsk + jc;
      for (int64_t jr = 0; jr < full; jr += ATL_GEMM_NR) {
        double *p = bp + jr * kst + k * ATL_GEMM_NR;
        ATL_GEMM_UNROLL
        for (int64_t s = 0; s < ATL_GEMM_NR; s++) p[s] = src[jr + s];
      }
    }
  else
    for (int64_t jr = 0; jr < full; jr += ATL_GEMM_NR)
      for (int64_t k = 0; k < kc; k++) {
        const double *src = B + (pc + k) * bsk + (jc + jr) * bsj;
        double *p = bp + jr * kst + k * ATL_GEMM_NR;
        ATL_GEMM_UNROLL
        for (int64_t s = 0; s < ATL_GEMM_NR; s++) p[s] = src[s * bsj];
      }
  if (full < nc) {
    double *p = bp + full * kst;
    const int64_t nr = nc - full;
    for (int64_t k = 0; k < kc; k++) {
      const double *src = B + (pc + k) * bsk + (jc + full) * bsj;
      for (int64_t s = 0; s < ATL_GEMM_NR; s++) p[k * ATL_GEMM_NR + s] = s < nr ? src[s * bsj] : 0.0;
    }
  }
}

/* relu (x > 0 ? x : 0) over the mr x nr tile at c, just written. */
static inline void atlh_gemm_relu_tile(double *c, int64_t csi, int64_t csj, int64_t mr, int64_t nr) {
  for (int64_t r = 0; r < mr; r++)
    for (int64_t s = 0; s < nr; s++) {
      double *p = c + r * csi + s * csj;
      *p = *p > 0.0 ? *p : 0.0;
    }
}

/* One block of KC rows of B (packed in bp) times the rows of A, the work
   items shared by nt threads, each packing its rows into its part of ap.
   With relu (the last block of k), relu is applied to each tile once its
   sums are complete, while it is in cache. */
static void atlh_gemm_block(double *C, int64_t csi, int64_t csj, int64_t M, const double *A, int64_t asi,
                            int64_t ask, const double *bp, int64_t bst, int64_t pc, int64_t kc, int64_t jc,
                            int64_t nc,
                            double *ap, int nt, int acc, int relu) {
  /* One thread takes all the columns at once: its rows of A are packed once. */
  const int64_t gw = nt > 1 ? ATL_GEMM_NG : nc, nb = (nc + gw - 1) / gw;
  const int64_t items = (M + ATL_GEMM_MC - 1) / ATL_GEMM_MC * nb;
  (void)nt;
#if defined(_OPENMP) && !defined(ATL_COUNT_OPS)
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
#endif
  for (int64_t it = 0; it < items; it++) {
    int t = 0;
#if defined(_OPENMP) && !defined(ATL_COUNT_OPS)
    t = omp_get_thread_num();
#endif
    double *mine = ap + (int64_t)t * ATL_GEMM_KC * ATL_GEMM_MC;
    const int64_t ic = it / nb * ATL_GEMM_MC, jg = it % nb * gw;
    const int64_t mc = M - ic < ATL_GEMM_MC ? M - ic : ATL_GEMM_MC;
    const int64_t ng = nc - jg < gw ? nc - jg : gw;
    atlh_gemm_pack_a(mine, A, asi, ask, ic, mc, pc, kc);
    for (int64_t jr = jg; jr < jg + ng; jr += ATL_GEMM_NR) {
      const int64_t nr = jg + ng - jr < ATL_GEMM_NR ? jg + ng - jr : ATL_GEMM_NR;
      for (int64_t ir = 0; ir < mc; ir += ATL_GEMM_MR) {
        const int64_t mr = mc - ir < ATL_GEMM_MR ? mc - ir : ATL_GEMM_MR;
        double *c = C + (ic + ir) * csi + (jc + jr) * csj;
        atlh_gemm_kernel(kc, mine + ir * kc, bp + jr * bst, c, csi, csj, mr, nr, pc == 0 && !acc);
        if (relu) atlh_gemm_relu_tile(c, csi, csj, mr, nr);
      }
    }
  }
}

#if defined(__AVX512F__)
/* Narrow products (N <= 16, such as a layer onto a few classes): B is
   packed once as rows of 16 (zero-padded), A is read where it lies, and
   ATL_NARROW_MR rows of C are held in registers (two zmm each) while k
   runs; by blocks of KC terms added to C in order, as the kernel above. */
#define ATL_NARROW_MR 12
static inline __attribute__((always_inline)) void atlh_gemm_narrow_rows(
    double *C, int64_t csi, int64_t csj, int64_t N, const double *A, int64_t asi, int64_t ask, const double *bp,
    int64_t K, int acc, const int mr) {
  const __mmask8 m0 = (__mmask8)(N >= 8 ? 0xff : (1u << N) - 1u), m1 = (__mmask8)(N <= 8 ? 0 : (1u << (N - 8)) - 1u);
  for (int64_t pc = 0; pc < K; pc += ATL_GEMM_KC) {
    const int64_t kc = K - pc < ATL_GEMM_KC ? K - pc : ATL_GEMM_KC;
    __m512d s0[ATL_NARROW_MR], s1[ATL_NARROW_MR];
ATL_GEMM_UNROLL
    for (int r = 0; r < mr; r++) s0[r] = s1[r] = _mm512_setzero_pd();
    for (int64_t k = pc; k < pc + kc; k++) {
      const __m512d b0 = _mm512_loadu_pd(bp + 16 * k), b1 = _mm512_loadu_pd(bp + 16 * k + 8);
      const double *a = A + k * ask;
ATL_GEMM_UNROLL
      for (int r = 0; r < mr; r++) {
        const __m512d av = _mm512_set1_pd(a[r * asi]);
        s0[r] = _mm512_fmadd_pd(av, b0, s0[r]);
        s1[r] = _mm512_fmadd_pd(av, b1, s1[r]);
      }
    }
    const int first = pc == 0 && !acc;
    for (int r = 0; r < mr; r++) {
      double *c = C + r * csi;
      if (csj == 1) {
        if (!first) {
          s0[r] = _mm512_add_pd(_mm512_maskz_loadu_pd(m0, c), s0[r]);
          s1[r] = _mm512_add_pd(_mm512_maskz_loadu_pd(m1, c + 8), s1[r]);
        }
        _mm512_mask_storeu_pd(c, m0, s0[r]);
        _mm512_mask_storeu_pd(c + 8, m1, s1[r]);
      } else {
        double out[16];
        _mm512_storeu_pd(out, s0[r]);
        _mm512_storeu_pd(out + 8, s1[r]);
        for (int64_t s = 0; s < N; s++) c[s * csj] = first ? out[s] : c[s * csj] + out[s];
      }
    }
  }
}

/* C = A.B (with acc: C += A.B) for N <= 16; 0 when bp cannot be had. */
static int atlh_gemm_narrow(double *C, int64_t csi, int64_t csj, int64_t M, int64_t N, int64_t K, const double *A,
                            int64_t asi, int64_t ask, const double *B, int64_t bsk, int64_t bsj, int acc, int nt) {
  double *bp = (double *)malloc(sizeof(double) * 16 * (size_t)K);
  if (bp == NULL) return 0;
  for (int64_t k = 0; k < K; k++)
    for (int64_t s = 0; s < 16; s++) bp[16 * k + s] = s < N ? B[k * bsk + s * bsj] : 0.0;
  const int64_t nb = M / ATL_NARROW_MR;
  (void)nt;
#if defined(_OPENMP) && !defined(ATL_COUNT_OPS)
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
#endif
  for (int64_t b = 0; b < nb; b++)
    atlh_gemm_narrow_rows(C + b * ATL_NARROW_MR * csi, csi, csj, N, A + b * ATL_NARROW_MR * asi, asi, ask, bp, K,
                          acc, ATL_NARROW_MR);
  for (int64_t i = nb * ATL_NARROW_MR; i < M; i++)
    atlh_gemm_narrow_rows(C + i * csi, csi, csj, N, A + i * asi, asi, ask, bp, K, acc, 1);
  free(bp);
  return 1;
}
#endif

/* A whole B packed once (for the many calls of a banded contraction):
   blocks of kst rows (kst = min(KC, K)) npad columns wide (N rounded up
   to NR), each as pack_b lays out its panels, kst rows apart. */
typedef struct {
  const double *p;
  int64_t kst, npad;
} atlh_bpre;

/* C = A.B (with acc: C += A.B), not counted. With pre, B is the part of
   the B packed in pre from row k0 and column j0: a block of it that
   starts on a block and a panel there is read from pre, not packed. */
static ATL_MAYBE_UNUSED void atlh_gemm_run(double *C, int64_t csi, int64_t csj, int64_t M, int64_t N, int64_t K,
                                           const double *A, int64_t asi, int64_t ask, const double *B, int64_t bsk,
                                           int64_t bsj, int acc, int relu, const atlh_bpre *pre, int64_t k0,
                                           int64_t j0) {
  if (M <= 0 || N <= 0) return;
  const double work = (double)M * (double)N * (double)K;
  int nt = 1;
#if defined(_OPENMP) && !defined(ATL_COUNT_OPS)
  if (work >= ATL_GEMM_PAR_WORK && !omp_in_parallel()) nt = omp_get_max_threads();
#endif
#if defined(__AVX512F__)
  if (N <= 16 && K > 0 && work >= ATL_GEMM_SMALL &&
      atlh_gemm_narrow(C, csi, csj, M, N, K, A, asi, ask, B, bsk, bsj, acc, nt)) {
    if (relu)
      for (int64_t i = 0; i < M; i++) atlh_gemm_relu_tile(C + i * csi, csi, csj, 1, N);
    return;
  }
#endif
  const int64_t ncap = N < ATL_GEMM_NC ? N : ATL_GEMM_NC;
  double *bp = K > 0 && work >= ATL_GEMM_SMALL
                   ? (double *)malloc(sizeof(double) * ATL_GEMM_KC * (size_t)(ncap + ATL_GEMM_NR))
                   : NULL;
  double *ap = bp != NULL ? (double *)malloc(sizeof(double) * ATL_GEMM_KC * ATL_GEMM_MC * (size_t)nt) : NULL;
  if (ap == NULL) {
    free(bp);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0.0;
        for (int64_t k = 0; k < K; k++) s += A[i * asi + k * ask] * B[k * bsk + j * bsj];
        s = acc ? C[i * csi + j * csj] + s : s;
        C[i * csi + j * csj] = relu && !(s > 0.0) ? 0.0 : s;
      }
    return;
  }
  for (int64_t jc = 0; jc < N; jc += ATL_GEMM_NC) {
    const int64_t nc = N - jc < ATL_GEMM_NC ? N - jc : ATL_GEMM_NC;
    for (int64_t pc = 0; pc < K; pc += ATL_GEMM_KC) {
      const int64_t kc = K - pc < ATL_GEMM_KC ? K - pc : ATL_GEMM_KC;
      const double *use = bp;
      int64_t bst = kc;
      if (pre != NULL && (k0 + pc) % pre->kst == 0 && (j0 + jc) % ATL_GEMM_NR == 0) {
        use = pre->p + (k0 + pc) / pre->kst * pre->npad * pre->kst + (j0 + jc) * pre->kst;
        bst = pre->kst;
      } else
        atlh_gemm_pack_b(bp, B, bsk, bsj, pc, kc, kc, jc, nc);
      atlh_gemm_block(C, csi, csj, M, A, asi, ask, use, bst, pc, kc, jc, nc, ap, nt, acc, relu && pc + kc >= K);
    }
  }
  free(ap);
  free(bp);
}

static ATL_MAYBE_UNUSED void atlh_gemm(double *C, int64_t csi, int64_t csj, int64_t M, int64_t N, int64_t K,
                                       const double *A, int64_t asi, int64_t ask, const double *B, int64_t bsk,
                                       int64_t bsj) {
#ifdef ATL_COUNT_OPS
  if (M > 0 && N > 0 && K > 0) {
    atlpacked_ops[1] += (uint64_t)M * (uint64_t)N * (uint64_t)K;
    atlpacked_ops[0] += (uint64_t)M * (uint64_t)N * (uint64_t)(K - 1);
  }
#endif
  atlh_gemm_run(C, csi, csj, M, N, K, A, asi, ask, B, bsk, bsj, 0, 0, NULL, 0, 0);
}

/* C = relu(A.B), elementwise: relu applied to each tile of C as its sums
   are complete (no second pass over C); counted as M.N calls besides the
   product's operations. */
static ATL_MAYBE_UNUSED void atlh_gemm_relu(double *C, int64_t csi, int64_t csj, int64_t M, int64_t N, int64_t K,
                                            const double *A, int64_t asi, int64_t ask, const double *B, int64_t bsk,
                                            int64_t bsj) {
#ifdef ATL_COUNT_OPS
  if (M > 0 && N > 0) {
    atlpacked_ops[2] += (uint64_t)M * (uint64_t)N;
    if (K > 0) {
      atlpacked_ops[1] += (uint64_t)M * (uint64_t)N * (uint64_t)K;
      atlpacked_ops[0] += (uint64_t)M * (uint64_t)N * (uint64_t)(K - 1);
    }
  }
#endif
  atlh_gemm_run(C, csi, csj, M, N, K, A, asi, ask, B, bsk, bsj, 0, 1, NULL, 0, 0);
}

/* Banded contractions: as atlh_gemm, but row i of C involves only the u in
   [i + lo, i + hi) (and in range). With out_band, u is the column j: the
   other elements of C are not written. Otherwise u is the summed k: a row
   without one is zero. Rows run by blocks of ATL_BAND_MB: in each, the u
   that every row of the block has run as one kernel call, the edges
   (at most ATL_BAND_MB - 1 wide each side) as below. */
#define ATL_BAND_MB 64

/* Columns [e0, e1) of the rows [i0, i1), out_band: dense kernel calls into
   a tile (not counted), of which only the band is copied to C. */
static void atlh_band_out_edge(double *C, int64_t csi, int64_t csj, int64_t i0, int64_t i1, int64_t e0, int64_t e1,
                               int64_t K, const double *A, int64_t asi, int64_t ask, const double *B, int64_t bsk,
                               int64_t bsj, int64_t lo, int64_t hi, const atlh_bpre *pre) {
  double tile[ATL_BAND_MB * ATL_BAND_MB];
  for (int64_t jc = e0; jc < e1; jc += ATL_BAND_MB) {
    const int64_t w = atlh_min(ATL_BAND_MB, e1 - jc);
    atlh_gemm_run(tile, w, 1, i1 - i0, w, K, A + i0 * asi, asi, ask, B + jc * bsj, bsk, bsj, 0, 0, pre, 0,
                  jc);
    for (int64_t i = i0; i < i1; i++) {
      const int64_t a = atlh_max(i + lo, jc), b = atlh_min(i + hi, jc + w);
      for (int64_t j = a; j < b; j++) C[i * csi + j * csj] = tile[(i - i0) * w + (j - jc)];
    }
  }
}

/* The terms k in [ka, kb) of the rows [i0, i1) (each within its band),
   added to C in increasing k: one row of B at a time. */
static void atlh_band_sum_edge(double *C, int64_t csi, int64_t csj, int64_t i0, int64_t i1, int64_t ka, int64_t kb,
                               int64_t N, const double *A, int64_t asi, int64_t ask, const double *B, int64_t bsk,
                               int64_t bsj, int64_t lo, int64_t hi) {
  for (int64_t i = i0; i < i1; i++) {
    const int64_t a = atlh_max(i + lo, ka), b = atlh_min(i + hi, kb);
    double *c = C + i * csi;
    for (int64_t k = a; k < b; k++) {
      const double x = A[i * asi + k * ask];
      const double *bk = B + k * bsk;
      if (csj == 1 && bsj == 1)
        for (int64_t j = 0; j < N; j++) c[j] += x * bk[j];
      else
        for (int64_t j = 0; j < N; j++) c[j * csj] += x * bk[j * bsj];
    }
  }
}

/* The rows [i0, i1) of a banded contraction. */
static void atlh_band_rows(double *C, int64_t csi, int64_t csj, int64_t i0, int64_t i1, int64_t N, int64_t K,
                           const double *A, int64_t asi, int64_t ask, const double *B, int64_t bsk, int64_t bsj,
                           int64_t lo, int64_t hi, int out_band, const atlh_bpre *pre) {
  const int64_t U = out_band ? N : K;
  const int64_t u0 = atlh_max(i0 + lo, 0), u1 = atlh_min(i1 - 1 + hi, U);
  const int64_t f0 = atlh_max(i1 - 1 + lo, 0), f1 = atlh_min(i0 + hi, U);
  const int full = f0 < f1;
  if (out_band) {
    if (full) {
      atlh_gemm_run(C + i0 * csi + f0 * csj, csi, csj, i1 - i0, f1 - f0, K, A + i0 * asi, asi, ask, B + f0 * bsj,
                    bsk, bsj, 0, 0, pre, 0, f0);
      atlh_band_out_edge(C, csi, csj, i0, i1, u0, f0, K, A, asi, ask, B, bsk, bsj, lo, hi, pre);
      atlh_band_out_edge(C, csi, csj, i0, i1, f1, u1, K, A, asi, ask, B, bsk, bsj, lo, hi, pre);
    } else
      atlh_band_out_edge(C, csi, csj, i0, i1, u0, u1, K, A, asi, ask, B, bsk, bsj, lo, hi, pre);
    return;
  }
  for (int64_t i = i0; i < i1; i++)
    for (int64_t j = 0; j < N; j++) C[i * csi + j * csj] = 0.0;
  if (full) {
    atlh_band_sum_edge(C, csi, csj, i0, i1, u0, f0, N, A, asi, ask, B, bsk, bsj, lo, hi);
    atlh_gemm_run(C + i0 * csi, csi, csj, i1 - i0, N, f1 - f0, A + i0 * asi + f0 * ask, asi, ask, B + f0 * bsk, bsk,
                  bsj, 1, 0, pre, f0, 0);
    atlh_band_sum_edge(C, csi, csj, i0, i1, f1, u1, N, A, asi, ask, B, bsk, bsj, lo, hi);
  } else
    atlh_band_sum_edge(C, csi, csj, i0, i1, u0, u1, N, A, asi, ask, B, bsk, bsj, lo, hi);
}

static ATL_MAYBE_UNUSED void atlh_gemm_band(double *C, int64_t csi, int64_t csj, int64_t M, int64_t N, int64_t K,
                                            const double *A, int64_t asi, int64_t ask, const double *B,
                                            int64_t bsk, int64_t bsj, int64_t lo, int64_t hi, int out_band) {
  const int64_t U = out_band ? N : K;
  double work = 0.0;
  for (int64_t i = 0; i < M; i++) {
    const int64_t a = atlh_max(i + lo, 0), b = atlh_min(i + hi, U);
    if (b <= a) continue;
    const uint64_t n = (uint64_t)(b - a);
    work += (double)n * (double)(out_band ? K : N);
#ifdef ATL_COUNT_OPS
    if (out_band && K > 0) {
      atlpacked_ops[1] += n * (uint64_t)K;
      atlpacked_ops[0] += n * (uint64_t)(K - 1);
    } else if (!out_band && N > 0) {
      atlpacked_ops[1] += (uint64_t)N * n;
      atlpacked_ops[0] += (uint64_t)N * (n - 1);
    }
#endif
  }
  if (M <= 0 || N <= 0) return;
  const int64_t nb = (M + ATL_BAND_MB - 1) / ATL_BAND_MB;
  /* B (K x N) packed once for all the blocks of rows, when there are
     several and it is large enough for the kernel. */
  atlh_bpre pre = {NULL, 0, 0};
  double *whole = NULL;
  if (nb > 1 && K > 0 && work >= ATL_GEMM_SMALL) {
    pre.kst = K < ATL_GEMM_KC ? K : ATL_GEMM_KC;
    pre.npad = (N + ATL_GEMM_NR - 1) / ATL_GEMM_NR * ATL_GEMM_NR;
    const int64_t kb = (K + ATL_GEMM_KC - 1) / ATL_GEMM_KC;
    whole = (double *)malloc(sizeof(double) * (size_t)(kb * pre.kst) * (size_t)pre.npad);
    if (whole != NULL)
      for (int64_t b = 0; b < kb; b++)
        atlh_gemm_pack_b(whole + b * pre.npad * pre.kst, B, bsk, bsj, b * ATL_GEMM_KC,
                         atlh_min(ATL_GEMM_KC, K - b * ATL_GEMM_KC), pre.kst, 0, N);
    pre.p = whole;
  }
  int par = 0;
#if defined(_OPENMP) && !defined(ATL_COUNT_OPS)
  par = work >= ATL_GEMM_PAR_WORK && !omp_in_parallel() && omp_get_max_threads() > 1;
#pragma omp parallel for schedule(dynamic, 1) if (par)
#endif
  for (int64_t b = 0; b < nb; b++) {
    const int64_t i0 = (nb - 1 - b) * ATL_BAND_MB;
    atlh_band_rows(C, csi, csj, i0, atlh_min(i0 + ATL_BAND_MB, M), N, K, A, asi, ask, B, bsk, bsj, lo, hi,
                   out_band, whole != NULL ? &pre : NULL);
  }
  free(whole);
  (void)par;
  (void)work;
}
"#;

/// Whether the loop IR calls the kernel.
pub(crate) fn used(body: &[crate::lower::ir::Stmt]) -> bool {
    use crate::lower::ir::Stmt;
    body.iter().any(|s| match s {
        Stmt::Line(l) => {
            l.contains("atlh_gemm(")
                || l.contains("atlh_gemm_relu(")
                || l.contains("atlh_gemm_band(")
        }
        Stmt::Decl { .. } => false,
        Stmt::For { body, .. } | Stmt::Block(body) | Stmt::Chunks { body, .. } => used(body),
        Stmt::If { then, els, .. } => used(then) || used(els),
    })
}
