/* The contraction kernel of the generated C (atlh_gemm) against the plain
   i-k-j loop nest that the lowering emits for a product it does not hand to
   the kernel, on one n x n x n product (or M x N x K, given as M,N,K), in CPU time (best of 15 calls
   each, interleaved, so that other processes on the machine slow both
   alike). Not part of CI. From the repository root:

     cargo run --release -- compile corpus/matmul.atl -o /tmp/matmul.c
     cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD \
        -DATL_GENERATED='"/tmp/matmul.c"' benches/gemm_kernel.c -o /tmp/gemm_kernel -lm
     OMP_NUM_THREADS=1 /tmp/gemm_kernel 256 512 1024
     OMP_NUM_THREADS=1 /tmp/gemm_kernel 1024,512,512 1024,10,512
*/
#include ATL_GENERATED
#include <stdio.h>
#include <time.h>

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void plain(int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *C) {
  for (int64_t i = 0; i < M; i++) {
    double *r = C + i * N;
    for (int64_t j = 0; j < N; j++) r[j] = 0.0;
    for (int64_t k = 0; k < K; k++) {
      const double a = A[i * K + k], *b = B + k * N;
      for (int64_t j = 0; j < N; j++) r[j] += a * b[j];
    }
  }
}

int main(int argc, char **argv) {
  for (int arg = 1; arg < argc; arg++) {
    long long m = 0, nn = 0, kk = 0;
    if (sscanf(argv[arg], "%lld,%lld,%lld", &m, &nn, &kk) != 3) m = nn = kk = atoll(argv[arg]);
    const int64_t M = m, N = nn, K = kk;
    double *A = malloc(sizeof(double) * M * K), *B = malloc(sizeof(double) * K * N);
    double *C = malloc(sizeof(double) * M * N), *D = malloc(sizeof(double) * M * N);
    for (int64_t i = 0; i < M * K; i++) A[i] = sin((double)i);
    for (int64_t i = 0; i < K * N; i++) B[i] = cos(0.3 * (double)i);
    double tk = 1e9, tp = 1e9, err = 0.0, big = 0.0;
    for (int r = 0; r < 15; r++) {
      double t = cpu_now();
      atlh_gemm(C, N, 1, M, N, K, A, K, 1, B, N, 1);
      t = cpu_now() - t;
      tk = t < tk ? t : tk;
      t = cpu_now();
      plain(M, N, K, A, B, D);
      t = cpu_now() - t;
      tp = t < tp ? t : tp;
    }
    for (int64_t i = 0; i < M * N; i++) {
      err = fabs(C[i] - D[i]) > err ? fabs(C[i] - D[i]) : err;
      big = fabs(D[i]) > big ? fabs(D[i]) : big;
    }
    const double flop = 2.0 * (double)M * (double)N * (double)K;
    printf("%lldx%lldx%lld: kernel %.3f ms (%.1f GFLOP/s), plain nest %.3f ms (%.1f GFLOP/s), %.1fx; difference %.1e relative\n",
           m, nn, kk, tk * 1e3, flop / tk * 1e-9, tp * 1e3, flop / tp * 1e-9, tp / tk, err / big);
    free(A);
    free(B);
    free(C);
    free(D);
  }
  return 0;
}
