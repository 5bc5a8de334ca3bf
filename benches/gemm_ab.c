/* Builds of the contraction kernel (atlh_gemm) against each other on one
   M x N x K product, interleaved in CPU time (best of REPS calls each, the
   builds called in turn), for before/after comparisons of the kernel on a
   loaded machine; prints each build's time, GFLOP/s and largest difference
   to the first build's result. Not part of CI. Each build is a library of
   the generated C of corpus/matmul.atl with a wrapper that exports the
   kernel:

     cargo run --release -- compile corpus/matmul.atl -o /tmp/after.c   (and before.c)
     echo 'void bench_gemm(double *C, int64_t csi, int64_t csj, int64_t M, int64_t N, int64_t K,
       const double *A, int64_t asi, int64_t ask, const double *B, int64_t bsk, int64_t bsj)
       { atlh_gemm(C, csi, csj, M, N, K, A, asi, ask, B, bsk, bsj); }' >> /tmp/after.c
     cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD -fPIC -shared \
        /tmp/after.c -o /tmp/after.so -lm
     cc -O2 benches/gemm_ab.c -o /tmp/gemm_ab -ldl -lm
     OMP_NUM_THREADS=1 /tmp/gemm_ab 1024,512,512 20 /tmp/before.so /tmp/after.so
*/
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*gemm_fn)(double *, int64_t, int64_t, int64_t, int64_t, int64_t, const double *, int64_t, int64_t,
                        const double *, int64_t, int64_t);

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long long m, n, k;
  if (argc < 4 || argc > 11 || sscanf(argv[1], "%lld,%lld,%lld", &m, &n, &k) != 3) {
    fprintf(stderr, "usage: gemm_ab M,N,K REPS LIB.so... (at most 8)\n");
    return 1;
  }
  const int reps = atoi(argv[2]), nv = argc - 3;
  gemm_fn f[8];
  double best[8], *C[8];
  double *A = malloc(sizeof(double) * m * k), *B = malloc(sizeof(double) * k * n);
  for (long long i = 0; i < m * k; i++) A[i] = sin((double)i);
  for (long long i = 0; i < k * n; i++) B[i] = cos(0.3 * (double)i);
  for (int v = 0; v < nv; v++) {
    void *h = dlopen(argv[3 + v], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL || (f[v] = (gemm_fn)dlsym(h, "bench_gemm")) == NULL) {
      fprintf(stderr, "%s: %s\n", argv[3 + v], dlerror());
      return 1;
    }
    best[v] = 1e9;
    C[v] = malloc(sizeof(double) * m * n);
  }
  for (int r = 0; r < reps; r++)
    for (int v = 0; v < nv; v++) {
      double t = cpu_now();
      f[v](C[v], n, 1, m, n, k, A, k, 1, B, n, 1);
      t = cpu_now() - t;
      best[v] = t < best[v] ? t : best[v];
    }
  for (int v = 0; v < nv; v++) {
    double d = 0.0;
    for (long long i = 0; i < m * n; i++) d = fmax(d, fabs(C[v][i] - C[0][i]));
    printf("%s: %.3f ms %.1f GFLOP/s maxdiff %.1e\n", argv[3 + v], best[v] * 1e3, 2.0 * m * n * k / best[v] * 1e-9, d);
  }
  return 0;
}
