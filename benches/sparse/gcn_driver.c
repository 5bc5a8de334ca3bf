/* Times the compiled gradient of benches/sparse/gcn_mean.atl (w.r.t. W
   and X, 16 features in and out) on a random graph of n nodes with about
   10 distinct out-edges per node, called from C with the relation prepared
   once (atlpacked_prepare: its layout and the transposed one built before
   the timed calls). Prints the CPU time of the best of `reps` calls and a
   checksum of the result (equal across builds that compute the same
   values, up to the last digits).

     target/release/atl-egg grad benches/sparse/gcn_mean.atl --wrt W,X > /tmp/gcn.atl
     target/release/atl-egg compile /tmp/gcn.atl -o /tmp/gcn.c
     cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD \
       /tmp/gcn.c benches/sparse/gcn_driver.c -o /tmp/gcn -lm
     OMP_NUM_THREADS=1 /tmp/gcn 1000000 5

   Run variants alternately, several times each, on a shared machine. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void *atlpacked_prepare(int64_t k, const int64_t *sz, const int64_t *layout, int64_t len, int *rc);
int atlpacked_entry_prepared(const int64_t *sz, const double *const *re, const int64_t *const *rel,
                             void *const *prep, double *const *out);
void atlpacked_prepared_free(void *prepared);
static uint64_t state = 88172645463325252ull;
static uint64_t next_random(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }
static int ascending(const void *a, const void *b) { const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b; return x < y ? -1 : x > y; }
static double cpu_seconds(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec; }
int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 1000000;
  const int reps = argc > 2 ? atoi(argv[2]) : 5;
  const int F = 16;
  int64_t *E = malloc(sizeof(int64_t) * (size_t)(7 + n + 10 * n));
  double *X = malloc(sizeof(double) * (size_t)(n * F)), *W = malloc(sizeof(double) * F * F);
  double *Wb = calloc(F * F, sizeof(double)), *Xb = calloc((size_t)(n * F), sizeof(double));
  int64_t *pos = E + 6, *crd = E + 7 + n, nnz = 0, row[10];
  for (int64_t i = 0; i < n; i++) {
    pos[i] = nnz;
    for (int k = 0; k < 10; k++) row[k] = (int64_t)(next_random() % (uint64_t)n);
    qsort(row, 10, sizeof(int64_t), ascending);
    for (int k = 0; k < 10; k++) if (k == 0 || row[k] != row[k - 1]) crd[nnz++] = row[k];
  }
  pos[n] = nnz;
  E[0] = 2; E[1] = nnz; E[2] = 0; E[3] = 0; E[4] = 6; E[5] = 7 + n;
  for (int64_t i = 0; i < n * F; i++) X[i] = (double)(next_random() % 2000001) / 1e6 - 1.0;
  for (int i = 0; i < F * F; i++) W[i] = ((double)(next_random() % 2000001) / 1e6 - 1.0) / F;
  const int64_t sz[] = {n, F, F};
  const double *re[] = {X, W};
  const int64_t *rel[] = {NULL};
  double *outs[] = {Wb, Xb};
  int rc = 0;
  void *prep[] = {atlpacked_prepare(0, sz, E, 7 + n + nnz, &rc)};
  if (prep[0] == NULL) { printf("prepare: error %d\n", rc); return 1; }
  double best = 1e300, checksum = 0.0;
  for (int r = 0; r < reps; r++) {
    const double t0 = cpu_seconds();
    rc = atlpacked_entry_prepared(sz, re, rel, prep, outs);
    const double t = cpu_seconds() - t0;
    if (rc != 0) { printf("error %d\n", rc); return 1; }
    if (t < best) best = t;
  }
  for (int i = 0; i < F * F; i++) checksum += Wb[i] * (double)(i % 7 + 1);
  for (int64_t i = 0; i < n * F; i++) checksum += Xb[i] * (double)(i % 7 + 1);
  printf("n %lld edges %lld best %.4f s checksum %.15e\n", (long long)n, (long long)nnz, best, checksum);
  return 0;
}
