/* Times the compiled gradient of corpus/sparse_matvec_stored.atl (w.r.t.
   A, one value per edge, and x) on a random square matrix of n rows with
   about 10 distinct entries per row, called from C with the pattern
   prepared once (atlpacked_prepare, before the timed calls). Prints the
   CPU time of the best of `reps` calls and a checksum of the result
   (equal across builds that compute the same values).

     target/release/atl-egg grad corpus/sparse_matvec_stored.atl --wrt A,x > /tmp/smv.atl
     target/release/atl-egg compile /tmp/smv.atl -o /tmp/smv.c
     cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD \
       /tmp/smv.c benches/sparse/matvec_driver.c -o /tmp/smv -lm
     OMP_NUM_THREADS=1 /tmp/smv 1000000 7

   Run variants alternately, several times each, on a shared machine. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
void *atlpacked_prepare(int64_t k, const int64_t *sz, const int64_t *layout, int64_t len, int *rc);
int atlpacked_entry_prepared(const int64_t *sz, const double *const *re, const int64_t *const *rel,
                             void *const *prep, double *const *out);
static uint64_t state = 88172645463325252ull;
static uint64_t next_random(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }
static int ascending(const void *a, const void *b) { const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b; return x < y ? -1 : x > y; }
static double cpu_seconds(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec; }
static double uniform(void) { return (double)(next_random() % 2000001) / 1e6 - 1.0; }
int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 1000000;
  const int reps = argc > 2 ? atoi(argv[2]) : 5;
  int64_t *S = malloc(sizeof(int64_t) * (size_t)(7 + n + 10 * n));
  int64_t *pos = S + 6, *crd = S + 7 + n, nnz = 0, row[10];
  for (int64_t i = 0; i < n; i++) {
    pos[i] = nnz;
    for (int k = 0; k < 10; k++) row[k] = (int64_t)(next_random() % (uint64_t)n);
    qsort(row, 10, sizeof(int64_t), ascending);
    for (int k = 0; k < 10; k++) if (k == 0 || row[k] != row[k - 1]) crd[nnz++] = row[k];
  }
  pos[n] = nnz;
  S[0] = 2; S[1] = nnz; S[2] = 0; S[3] = 0; S[4] = 6; S[5] = 7 + n;
  double *A = malloc(sizeof(double) * (size_t)nnz), *x = malloc(sizeof(double) * (size_t)n);
  double *y = malloc(sizeof(double) * (size_t)n);
  double *Ab = malloc(sizeof(double) * (size_t)nnz), *xb = malloc(sizeof(double) * (size_t)n);
  for (int64_t q = 0; q < nnz; q++) A[q] = uniform();
  for (int64_t i = 0; i < n; i++) x[i] = uniform(), y[i] = uniform();
  const int64_t sz[] = {n, n};
  const double *re[] = {A, x, y};
  const int64_t *rel[] = {NULL};
  double *outs[] = {Ab, xb};
  int rc = 0;
  void *prep[] = {atlpacked_prepare(0, sz, S, 7 + n + nnz, &rc)};
  if (prep[0] == NULL) { printf("prepare: error %d\n", rc); return 1; }
  double best = 1e300, checksum = 0.0;
  for (int r = 0; r < reps; r++) {
    const double t0 = cpu_seconds();
    rc = atlpacked_entry_prepared(sz, re, rel, prep, outs);
    const double t = cpu_seconds() - t0;
    if (rc != 0) { printf("error %d\n", rc); return 1; }
    if (t < best) best = t;
  }
  for (int64_t q = 0; q < nnz; q++) checksum += Ab[q] * (double)(q % 7 + 1);
  for (int64_t i = 0; i < n; i++) checksum += xb[i] * (double)(i % 5 + 1);
  printf("n %lld edges %lld best %.4f s %.2f ns/edge checksum %.15e\n", (long long)n, (long long)nnz, best,
         1e9 * best / (double)nnz, checksum);
  return 0;
}
