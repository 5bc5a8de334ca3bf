/* This core's double-precision peak: twelve independent chains of fused
   multiply-adds held in registers (no loads), in CPU time, best of 5 runs,
   with 512-bit (AVX-512) and 256-bit vectors. The ceiling for the
   contraction kernel's GFLOP/s (benches/gemm_kernel.c). Not part of CI:

     cc -O2 -march=native benches/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
*/
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define CHAINS(V, FMA, SET, LANES, NAME)                                                               \
  static void NAME(void) {                                                                             \
    V a0 = SET(1), a1 = SET(2), a2 = SET(3), a3 = SET(4), a4 = SET(5), a5 = SET(6);                   \
    V a6 = SET(7), a7 = SET(8), a8 = SET(9), a9 = SET(10), a10 = SET(11), a11 = SET(12);              \
    const V x = SET(1.0000001), y = SET(0.9999999);                                                    \
    const long n = 100000000;                                                                          \
    double best = 1e9;                                                                                 \
    for (int r = 0; r < 5; r++) {                                                                      \
      double t = cpu_now();                                                                            \
      for (long k = 0; k < n; k++) {                                                                   \
        a0 = FMA(a0, x, y), a1 = FMA(a1, x, y), a2 = FMA(a2, x, y), a3 = FMA(a3, x, y);                \
        a4 = FMA(a4, x, y), a5 = FMA(a5, x, y), a6 = FMA(a6, x, y), a7 = FMA(a7, x, y);                \
        a8 = FMA(a8, x, y), a9 = FMA(a9, x, y), a10 = FMA(a10, x, y), a11 = FMA(a11, x, y);            \
      }                                                                                                \
      t = cpu_now() - t;                                                                               \
      best = t < best ? t : best;                                                                      \
    }                                                                                                  \
    const V s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;                          \
    printf("%d-bit: %.1f GFLOP/s (checksum %g)\n", LANES * 64, (double)n * 12 * 2 * LANES / best * 1e-9, \
           s[0]);                                                                                      \
  }

#if defined(__AVX512F__)
CHAINS(__m512d, _mm512_fmadd_pd, _mm512_set1_pd, 8, peak512)
#endif
#if defined(__FMA__)
CHAINS(__m256d, _mm256_fmadd_pd, _mm256_set1_pd, 4, peak256)
#endif

int main(void) {
#if defined(__AVX512F__)
  peak512();
#endif
#if defined(__FMA__)
  peak256();
#endif
  return 0;
}
