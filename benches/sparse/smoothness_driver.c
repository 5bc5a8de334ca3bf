/* Times the compiled graph_smoothness (its f or its gradient w.r.t. x,
   both take the same arguments) on a random graph of n nodes with about
   10 distinct out-edges per node, called from C: no Python, no layout
   conversion, the relation's layout built once. Prints the CPU time of the
   best of `reps` calls and a checksum of the result (equal across builds
   that compute the same values, up to the last digits).

     target/release/atl-egg grad corpus/graph_smoothness.atl --wrt x > /tmp/g.atl
     target/release/atl-egg compile /tmp/g.atl -o /tmp/g.c
     cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD \
       /tmp/g.c benches/sparse/smoothness_driver.c -o /tmp/g -lm
     OMP_NUM_THREADS=1 /tmp/g 1000000 9
     OMP_NUM_THREADS=1 /tmp/g 1000000 9 prepared
     OMP_NUM_THREADS=1 /tmp/g 1000000 9 pairs
     OMP_NUM_THREADS=1 /tmp/g 1000000 9 scatter
     OMP_NUM_THREADS=1 /tmp/g 1000000 9 scatter-prepared

   (for f, compile corpus/graph_smoothness.atl itself; its result is
   out[0]). With `prepared`, the relation is prepared once before the
   timed calls (atlpacked_prepare: its layout checked and copied, the
   transposed layout built) and the calls go through
   atlpacked_entry_prepared. With `pairs`, every call is given the
   edges as sorted pairs, as the Python loader's calls are: it lays them
   out with atlpacked_pairs_layout (in a buffer kept across calls, as the
   loader keeps it; `pairs-fresh`: a fresh buffer each call) and then
   calls the function, which builds the transposed layout; the time is
   both. With `scatter` (the pairs laid out in every call, as `pairs`)
   or `scatter-prepared` (the layout as built once), the calls run the
   gradient written by hand without the transposed layout instead of the
   compiled function (hand_scatter below; for the gradient only, its
   checksum equal to the compiled gradient's up to the last digits); with
   `walk` or `walk-prepared`, f written by hand the same way (hand_walk;
   for f only). Run
   variants alternately, several times each, on a shared machine. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <string.h>

int atl_graph_smoothness(int64_t n, const int64_t *E, const double *x, double lam, double *out);
void *atlpacked_prepare(int64_t k, const int64_t *sz, const int64_t *layout, int64_t len, int *rc);
int atlpacked_entry_prepared(const int64_t *sz, const double *const *re, const int64_t *const *rel,
                             void *const *prep, double *const *out);
int64_t atlpacked_pairs_layout(const int64_t *pairs, int64_t nnz, int64_t rows, int64_t cols, int64_t *out);
void atlpacked_prepared_free(void *prepared);

static uint64_t state = 88172645463325252ull;
static uint64_t next_random(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
static int ascending(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}
static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Whether row j of the sorted layout (pos, crd) stores column i: a binary
   search of the row. */
static inline int row_stores(const int64_t *pos, const int64_t *crd, int64_t j, int64_t i) {
  int64_t lo = pos[j], hi = pos[j + 1];
  const int64_t end = hi;
  while (lo < hi) {
    const int64_t m = lo + (hi - lo) / 2;
    if (crd[m] < i) lo = m + 1; else hi = m;
  }
  return lo < end && crd[lo] == i;
}

/* The gradient w.r.t. x in one walk of E's rows, without E's transpose:
   a stored (i, j) with i < j adds 2 (x_i - x_j) into x̄[i] along the row
   and subtracts it from x̄[j] at the stored coordinate; one with j < i is
   the pair (j, i) and counts only where (j, i) is not stored itself (the
   union's pairs counted once), which a binary search in row j of E
   tests. x̄[j] and x[j] are prefetched 32 edges ahead, as the compiled
   scatters prefetch the element they add into. */
static int hand_scatter(int64_t n, const int64_t *E, const double *x, double lam, double *out) {
  const int64_t *pos = E + E[4], *crd = E + E[5], nnz = E[1];
  memset(out, 0, sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    const int64_t a = pos[i], b = pos[i + 1];
    const double xi = x[i];
    double acc = 0.0;
    for (int64_t q = a; q < b; q++) {
      const int64_t ahead = crd[q + 32 < nnz ? q + 32 : nnz - 1], j = crd[q];
      __builtin_prefetch(x + ahead);
      __builtin_prefetch(out + ahead, 1);
      if (j > i) {
        const double d = 2.0 * (xi - x[j]);
        acc += d;
        out[j] -= d;
      } else if (j < i) {
        if (!row_stores(pos, crd, j, i)) {
          const double d = 2.0 * (x[j] - xi);
          out[j] += d;
          acc -= d;
        }
      }
    }
    if (a < b) acc += 2.0 * (xi * lam);
    out[i] += acc;
  }
  return 0;
}

/* f in one walk of E's rows, without E's transpose: the pairs as in
   hand_scatter, each adding (x_i - x_j)^2. */
static int hand_walk(int64_t n, const int64_t *E, const double *x, double lam, double *out) {
  const int64_t *pos = E + E[4], *crd = E + E[5], nnz = E[1];
  double acc = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t a = pos[i], b = pos[i + 1];
    const double xi = x[i];
    for (int64_t q = a; q < b; q++) {
      const int64_t j = crd[q];
      __builtin_prefetch(x + crd[q + 32 < nnz ? q + 32 : nnz - 1]);
      if (j > i) {
        acc += (xi - x[j]) * (xi - x[j]);
      } else if (j < i) {
        if (!row_stores(pos, crd, j, i)) acc += (x[j] - xi) * (x[j] - xi);
      }
    }
    if (a < b) acc += lam * (xi * xi);
  }
  out[0] = acc;
  return 0;
}

int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 1000000;
  const int reps = argc > 2 ? atoi(argv[2]) : 5;
  const int prepared = argc > 3 && strcmp(argv[3], "prepared") == 0;
  const int fresh = argc > 3 && strcmp(argv[3], "pairs-fresh") == 0;
  const int scatter_prepared = argc > 3 && strcmp(argv[3], "scatter-prepared") == 0;
  const int scatter = scatter_prepared || (argc > 3 && strcmp(argv[3], "scatter") == 0);
  const int walk_prepared = argc > 3 && strcmp(argv[3], "walk-prepared") == 0;
  const int walk = walk_prepared || (argc > 3 && strcmp(argv[3], "walk") == 0);
  const int pairs = fresh || (argc > 3 && strcmp(argv[3], "pairs") == 0) || (scatter && !scatter_prepared) ||
                    (walk && !walk_prepared);
  /* the compressed layout of an n x n relation (backend/marshal.rs):
     arity, nnz, level 0 (dense), level 1 offsets of pos and crd */
  int64_t *E = malloc(sizeof(int64_t) * (size_t)(7 + n + 10 * n));
  double *x = malloc(sizeof(double) * (size_t)n), *out = calloc((size_t)n, sizeof(double));
  if (!E || !x || !out) return 2;
  int64_t *pos = E + 6, *crd = E + 7 + n, nnz = 0, row[10];
  for (int64_t i = 0; i < n; i++) {
    pos[i] = nnz;
    for (int k = 0; k < 10; k++) row[k] = (int64_t)(next_random() % (uint64_t)n);
    qsort(row, 10, sizeof(int64_t), ascending);
    for (int k = 0; k < 10; k++)
      if (k == 0 || row[k] != row[k - 1]) crd[nnz++] = row[k];
  }
  pos[n] = nnz;
  E[0] = 2; E[1] = nnz; E[2] = 0; E[3] = 0; E[4] = 6; E[5] = 7 + n;
  for (int64_t i = 0; i < n; i++) x[i] = (double)(next_random() % 1000000) / 1e6;
  double best = 1e300, checksum = 0.0;
  const double lam = 0.5;
  const int64_t sz[] = {n};
  const double *re[] = {x, &lam};
  const int64_t *rel[] = {NULL};
  double *outs[] = {out};
  void *prep[] = {NULL};
  if (prepared) {
    int rc = 0;
    prep[0] = atlpacked_prepare(0, sz, E, 7 + n + nnz, &rc);
    if (prep[0] == NULL) {
      printf("prepare: error %d\n", rc);
      return 1;
    }
  }
  int64_t *tuples = NULL, *kept = NULL;
  if (pairs) {
    tuples = malloc(sizeof(int64_t) * (size_t)(2 * nnz));
    if (!tuples) return 2;
    for (int64_t i = 0; i < n; i++)
      for (int64_t q = pos[i]; q < pos[i + 1]; q++) { tuples[2 * q] = i; tuples[2 * q + 1] = crd[q]; }
  }
  for (int r = 0; r < reps; r++) {
    const double t0 = cpu_seconds();
    int rc;
    if (pairs) {
      int64_t *L = kept != NULL ? kept : malloc(sizeof(int64_t) * (size_t)(7 + n + nnz));
      if (!L || atlpacked_pairs_layout(tuples, nnz, n, n, L) != 0) return 3;
      rc = scatter ? hand_scatter(n, L, x, lam, out)
           : walk  ? hand_walk(n, L, x, lam, out)
                   : atl_graph_smoothness(n, L, x, lam, out);
      if (fresh) free(L); else kept = L;
    } else {
      rc = scatter    ? hand_scatter(n, E, x, lam, out)
           : walk     ? hand_walk(n, E, x, lam, out)
           : prepared ? atlpacked_entry_prepared(sz, re, rel, prep, outs)
                      : atl_graph_smoothness(n, E, x, lam, out);
    }
    const double t = cpu_seconds() - t0;
    if (rc != 0) {
      printf("error %d\n", rc);
      return 1;
    }
    if (t < best) best = t;
  }
  for (int64_t i = 0; i < n; i++) checksum += out[i] * (double)(i % 7 + 1);
  printf("n %lld edges %lld best %.4f s checksum %.12e\n", (long long)n, (long long)nnz, best, checksum);
  atlpacked_prepared_free(prep[0]);
  free(E); free(x); free(out); free(tuples); free(kept);
  return 0;
}
