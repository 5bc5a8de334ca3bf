/* The contraction kernel of the generated C (atlh_gemm) against the plain
   i-k-j loop nest that the lowering emits for a product it does not hand to
   the kernel, on one n x n x n product, in CPU time (best of 15 calls
   each, interleaved, so that other processes on the machine slow both
   alike). Not part of CI. From the repository root:

     cargo run --release -- compile corpus/matmul.atl -o /tmp/matmul.c
     cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD \
        -DATL_GENERATED='"/tmp/matmul.c"' benches/gemm_kernel.c -o /tmp/gemm_kernel -lm
     OMP_NUM_THREADS=1 /tmp/gemm_kernel 256 512 1024
*/
#include ATL_GENERATED
#include <stdio.h>
#include <time.h>

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void plain(int64_t n, const double *A, const double *B, double *C) {
  for (int64_t i = 0; i < n; i++) {
    double *r = C + i * n;
    for (int64_t j = 0; j < n; j++) r[j] = 0.0;
    for (int64_t k = 0; k < n; k++) {
      const double a = A[i * n + k], *b = B + k * n;
      for (int64_t j = 0; j < n; j++) r[j] += a * b[j];
    }
  }
}

int main(int argc, char **argv) {
  for (int arg = 1; arg < argc; arg++) {
    const int64_t n = atoi(argv[arg]);
    double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n);
    double *C = malloc(sizeof(double) * n * n), *D = malloc(sizeof(double) * n * n);
    for (int64_t i = 0; i < n * n; i++) {
      A[i] = sin((double)i);
      B[i] = cos(0.3 * (double)i);
    }
    double tk = 1e9, tp = 1e9, err = 0.0, big = 0.0;
    for (int r = 0; r < 15; r++) {
      double t = cpu_now();
      atlh_gemm(C, n, 1, n, n, n, A, n, 1, B, n, 1);
      t = cpu_now() - t;
      tk = t < tk ? t : tk;
      t = cpu_now();
      plain(n, A, B, D);
      t = cpu_now() - t;
      tp = t < tp ? t : tp;
    }
    for (int64_t i = 0; i < n * n; i++) {
      err = fabs(C[i] - D[i]) > err ? fabs(C[i] - D[i]) : err;
      big = fabs(D[i]) > big ? fabs(D[i]) : big;
    }
    const double flop = 2.0 * (double)n * (double)n * (double)n;
    printf("n=%lld: kernel %.3f ms (%.1f GFLOP/s), plain nest %.3f ms (%.1f GFLOP/s), %.1fx; difference %.1e relative\n",
           (long long)n, tk * 1e3, flop / tk * 1e-9, tp * 1e3, flop / tp * 1e-9, tp / tk, err / big);
    free(A);
    free(B);
    free(C);
    free(D);
  }
  return 0;
}
