/* The floor of the sparse harness (benches/sparse/run.py): each program's
   loss and gradient written by hand as plain C loops over the same CSR
   arrays (the rows of E and of its transpose, built outside the timed
   calls as a prepared relation's are), on a random graph of the same kind
   (n nodes, about 10 distinct out-edges per node), with software prefetch
   of the gathered rows D edges ahead (D = 0: none). Prints, per program,
   mode and D, the best of five calls in CPU time and the time per edge.
   One thread. Not run in CI:

       cc -O3 -march=native -o /tmp/floor benches/sparse/floor.c
       /tmp/floor 10000 && /tmp/floor 1000000

   The exponent of a row is log(t(10^6) / t(10^4)) / log(100). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define F 16 /* gcn_mean's features in and out */

static int64_t n, nnz, *pos, *crd, *tpos, *tcrd, *tperm;

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static int by_value(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}
static double cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static void *alloc(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == NULL) exit(2);
  return p;
}

/* The column of edge q + D (D > 0), clipped to the last edge. */
#define AHEAD(c, q, D) (c)[(q) + (D) < nnz ? (q) + (D) : nnz - 1]
#define PF(p) __builtin_prefetch(p)
#define PFW(p) __builtin_prefetch(p, 1)

/* The first position in [lo, hi) of the ascending c whose value is
   above i, hi if none. */
static int64_t above(const int64_t *c, int64_t lo, int64_t hi, int64_t i) {
  while (lo < hi) {
    const int64_t m = lo + (hi - lo) / 2;
    if (c[m] <= i) lo = m + 1; else hi = m;
  }
  return lo;
}
/* graph_smoothness: sum over i < j adjacent either way of (x_i - x_j)^2
   plus lam x_i^2 (lam = 0.5) where i has an out-edge; the pairs (i, j)
   with i < j come from row i of E (j > i) and row i of E^T not in E
   (j > i, tested by a cursor into row i of E). */
static double smooth_f(const double *x, double *out, int D) {
  (void)out;
  double acc = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t a = above(crd, pos[i], pos[i + 1], i);
    int64_t c = a;
    for (int64_t q = a; q < pos[i + 1]; q++) {
      if (D) PF(x + AHEAD(crd, q, D));
      const int64_t j = crd[q];
      acc += (x[i] - x[j]) * (x[i] - x[j]);
    }
    for (int64_t q = above(tcrd, tpos[i], tpos[i + 1], i); q < tpos[i + 1]; q++) {
      if (D) PF(x + AHEAD(tcrd, q, D));
      const int64_t j = tcrd[q];
      while (c < pos[i + 1] && crd[c] < j) c++;
      if (!(c < pos[i + 1] && crd[c] == j)) acc += (x[i] - x[j]) * (x[i] - x[j]);
    }
    if (pos[i + 1] > pos[i]) acc += 0.5 * x[i] * x[i];
  }
  return acc;
}
/* Its gradient: the same walks, each pair adding to row i's element. */
static double smooth_g(const double *x, double *g, int D) {
  for (int64_t i = 0; i < n; i++) {
    double acc = pos[i + 1] > pos[i] ? x[i] : 0.0;
    int64_t c = pos[i];
    for (int64_t q = pos[i]; q < pos[i + 1]; q++) {
      if (D) PF(x + AHEAD(crd, q, D));
      const int64_t j = crd[q];
      if (j != i) acc += 2.0 * (x[i] - x[j]);
    }
    for (int64_t q = tpos[i]; q < tpos[i + 1]; q++) {
      if (D) PF(x + AHEAD(tcrd, q, D));
      const int64_t j = tcrd[q];
      while (c < pos[i + 1] && crd[c] < j) c++;
      if (j != i && !(c < pos[i + 1] && crd[c] == j)) acc += 2.0 * (x[i] - x[j]);
    }
    g[i] = acc;
  }
  return g[0];
}
/* mesh_laplacian: 0.5 sum over edges of |x_i - x_j|^2, x of 3 columns. */
static double mesh_f(const double *x, double *out, int D) {
  (void)out;
  double acc = 0.0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t q = pos[i]; q < pos[i + 1]; q++) {
      if (D) PF(x + 3 * AHEAD(crd, q, D)), PF(x + 3 * AHEAD(crd, q, D) + 2);
      const int64_t j = crd[q];
      for (int c = 0; c < 3; c++) acc += (x[3 * i + c] - x[3 * j + c]) * (x[3 * i + c] - x[3 * j + c]);
    }
  return 0.5 * acc;
}
static double mesh_g(const double *x, double *g, int D) {
  for (int64_t i = 0; i < n; i++) {
    double a[3] = {0, 0, 0};
    for (int64_t q = pos[i]; q < pos[i + 1]; q++) {
      if (D) PF(x + 3 * AHEAD(crd, q, D)), PF(x + 3 * AHEAD(crd, q, D) + 2);
      const int64_t j = crd[q];
      for (int c = 0; c < 3; c++) a[c] += x[3 * i + c] - x[3 * j + c];
    }
    for (int64_t q = tpos[i]; q < tpos[i + 1]; q++) {
      if (D) PF(x + 3 * AHEAD(tcrd, q, D)), PF(x + 3 * AHEAD(tcrd, q, D) + 2);
      const int64_t j = tcrd[q];
      for (int c = 0; c < 3; c++) a[c] += x[3 * i + c] - x[3 * j + c];
    }
    for (int c = 0; c < 3; c++) g[3 * i + c] = a[c];
  }
  return g[0];
}
/* sparse_matvec: |A x - y|^2, A one value per edge. */
static const double *A, *y;
static double spmv_f(const double *x, double *out, int D) {
  (void)out;
  double acc = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double r = 0.0;
    for (int64_t q = pos[i]; q < pos[i + 1]; q++) {
      if (D) PF(x + AHEAD(crd, q, D));
      r += A[q] * x[crd[q]];
    }
    acc += (r - y[i]) * (r - y[i]);
  }
  return acc;
}
/* Its gradient: r_bar by rows, then A_bar (row order) and x_bar (a
   scatter) in one walk. */
static double *rbar, *Abar;
static double spmv_g(const double *x, double *xbar, int D) {
  for (int64_t i = 0; i < n; i++) {
    double r = 0.0;
    for (int64_t q = pos[i]; q < pos[i + 1]; q++) {
      if (D) PF(x + AHEAD(crd, q, D));
      r += A[q] * x[crd[q]];
    }
    rbar[i] = 2.0 * (r - y[i]);
  }
  memset(xbar, 0, sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t q = pos[i]; q < pos[i + 1]; q++) {
      if (D) PF(x + AHEAD(crd, q, D)), PFW(xbar + AHEAD(crd, q, D));
      const int64_t j = crd[q];
      Abar[q] = x[j] * rbar[i];
      xbar[j] += rbar[i] * A[q];
    }
  return xbar[0];
}
/* gcn_mean: XW = X W; per row i, z = relu(s_i sum_j XW_j), s_i =
   1 / (1 + degree); the loss sum z^2. */
static const double *W;
static double *XW, *T, *Tb, *XWb;
static void gemm(const double *a, const double *b, double *c, int64_t rows) { /* c = a b, F x F */
  for (int64_t i = 0; i < rows; i++) {
    double r[F] = {0};
    for (int k = 0; k < F; k++)
      for (int c2 = 0; c2 < F; c2++) r[c2] += a[F * i + k] * b[F * k + c2];
    memcpy(c + F * i, r, sizeof r);
  }
}
/* Row i of the mean aggregation: r = sum of XW's rows over row i's edges;
   returns the row's scale 1 / (1 + degree). */
static inline double gcn_row(int64_t i, double r[F], int D) {
  for (int c = 0; c < F; c++) r[c] = 0.0;
  for (int64_t q = pos[i]; q < pos[i + 1]; q++) {
    if (D) PF(XW + F * AHEAD(crd, q, D)), PF(XW + F * AHEAD(crd, q, D) + 8);
    const double *row = XW + F * crd[q];
    for (int c = 0; c < F; c++) r[c] += row[c];
  }
  return 1.0 / (1.0 + (double)(pos[i + 1] - pos[i]));
}
static double gcn_f(const double *X, double *out, int D) {
  (void)out;
  gemm(X, W, XW, n);
  double acc = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double r[F];
    const double s = gcn_row(i, r, D);
    for (int c = 0; c < F; c++) {
      const double z = s * r[c] > 0 ? s * r[c] : 0.0;
      acc += z * z;
    }
  }
  return acc;
}
/* Its gradient: the forward aggregation, t_bar1 = s 2 relu(t) step(t) by
   rows, XW_bar = E^T t_bar1 (a gather over the transposed rows), then
   W_bar = X^T XW_bar and X_bar = XW_bar W^T. */
static double gcn_g(const double *X, double *Xbar, int D) {
  gemm(X, W, XW, n);
  for (int64_t i = 0; i < n; i++) {
    double r[F];
    const double s = gcn_row(i, r, D);
    for (int c = 0; c < F; c++) {
      const double t = s * r[c];
      Tb[F * i + c] = t > 0 ? s * 2.0 * t : 0.0;
    }
  }
  for (int64_t j = 0; j < n; j++) {
    double r[F] = {0};
    for (int64_t q = tpos[j]; q < tpos[j + 1]; q++) {
      if (D) PF(Tb + F * AHEAD(tcrd, q, D)), PF(Tb + F * AHEAD(tcrd, q, D) + 8);
      const double *row = Tb + F * tcrd[q];
      for (int c = 0; c < F; c++) r[c] += row[c];
    }
    memcpy(XWb + F * j, r, sizeof r);
  }
  double Wb[F * F] = {0};
  for (int64_t j = 0; j < n; j++)
    for (int g = 0; g < F; g++)
      for (int c = 0; c < F; c++) Wb[F * g + c] += X[F * j + g] * XWb[F * j + c];
  for (int64_t j = 0; j < n; j++) {
    double a[F] = {0};
    for (int c = 0; c < F; c++)
      for (int g = 0; g < F; g++) a[g] += XWb[F * j + c] * W[F * g + c];
    memcpy(Xbar + F * j, a, sizeof a);
  }
  return Wb[0] + Xbar[0];
}

int main(int argc, char **argv) {
  n = argc > 1 ? atoll(argv[1]) : 10000;
  pos = alloc(sizeof(int64_t) * (size_t)(n + 1));
  crd = alloc(sizeof(int64_t) * (size_t)(10 * n));
  pos[0] = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t t[10];
    for (int k = 0; k < 10; k++) t[k] = (int64_t)(next() % (uint64_t)n);
    qsort(t, 10, sizeof t[0], by_value);
    for (int k = 0; k < 10; k++)
      if (k == 0 || t[k] != t[k - 1]) crd[nnz++] = t[k];
    pos[i + 1] = nnz;
  }
  /* the transposed rows (a counting sort), built once as a prepared relation's */
  tpos = alloc(sizeof(int64_t) * (size_t)(n + 1));
  tcrd = alloc(sizeof(int64_t) * (size_t)nnz);
  tperm = alloc(sizeof(int64_t) * (size_t)nnz);
  memset(tpos, 0, sizeof(int64_t) * (size_t)(n + 1));
  for (int64_t q = 0; q < nnz; q++) tpos[crd[q] + 1]++;
  for (int64_t i = 0; i < n; i++) tpos[i + 1] += tpos[i];
  {
    int64_t *at = alloc(sizeof(int64_t) * (size_t)n);
    memcpy(at, tpos, sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
      for (int64_t q = pos[i]; q < pos[i + 1]; q++) tperm[at[crd[q]]] = q, tcrd[at[crd[q]]++] = i;
    free(at);
  }
  double *in = alloc(sizeof(double) * (size_t)(F * n)), *out = alloc(sizeof(double) * (size_t)(F * n));
  double *a = alloc(sizeof(double) * (size_t)nnz), *yy = alloc(sizeof(double) * (size_t)n), *w = alloc(sizeof(double) * F * F);
  for (int64_t k = 0; k < F * n; k++) in[k] = (double)(next() % 2001) / 1000.0 - 1.0;
  for (int64_t k = 0; k < nnz; k++) a[k] = (double)(next() % 2001) / 1000.0 - 1.0;
  for (int64_t k = 0; k < n; k++) yy[k] = (double)(next() % 2001) / 1000.0 - 1.0;
  for (int k = 0; k < F * F; k++) w[k] = ((double)(next() % 2001) / 1000.0 - 1.0) / F;
  A = a, y = yy, W = w;
  rbar = alloc(sizeof(double) * (size_t)n);
  Abar = alloc(sizeof(double) * (size_t)nnz);
  XW = alloc(sizeof(double) * (size_t)(F * n));
  T = alloc(sizeof(double) * (size_t)(F * n));
  Tb = alloc(sizeof(double) * (size_t)(F * n));
  XWb = alloc(sizeof(double) * (size_t)(F * n));
  struct {
    const char *name, *mode;
    double (*fn)(const double *, double *, int);
  } progs[] = {{"graph_smoothness", "f", smooth_f}, {"graph_smoothness", "gradient", smooth_g},
               {"gcn_mean", "f", gcn_f},            {"gcn_mean", "gradient", gcn_g},
               {"mesh_laplacian", "f", mesh_f},     {"mesh_laplacian", "gradient", mesh_g},
               {"sparse_matvec", "f", spmv_f},      {"sparse_matvec", "gradient", spmv_g}};
  const int ds[] = {0, 8, 16, 32, 64};
  for (size_t p = 0; p < sizeof progs / sizeof progs[0]; p++) {
    double best[5] = {1e30, 1e30, 1e30, 1e30, 1e30}, sum = 0.0;
    for (int r = 0; r < 5; r++) /* the distances alternated, five rounds */
      for (int d = 0; d < 5; d++) {
        const double t0 = cpu();
        sum += progs[p].fn(in, out, ds[d]);
        const double t = cpu() - t0;
        if (t < best[d]) best[d] = t;
      }
    for (int d = 0; d < 5; d++)
      printf("%s %s n=%lld edges=%lld D=%d: %.4g s, %.2f ns/edge\n", progs[p].name, progs[p].mode, (long long)n,
             (long long)nnz, ds[d], best[d], 1e9 * best[d] / (double)nnz);
    if (sum != sum) printf("(nan)\n");
  }
  return 0;
}
