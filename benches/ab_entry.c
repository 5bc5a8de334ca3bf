/* Two builds of one generated C function timed interleaved through their
   `atlpacked_entry` (CPU time of the process, best of REPS calls each,
   alternating), for before/after comparisons of the lowering on a loaded
   machine without Python. Inputs are uniform in [-1, 1] (seed 1), arrays
   64-byte aligned.

     atl-egg compile PROGRAM.atl -o p.c
     cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD \
        -fPIC -shared p.c -o after.so -lm        (before.so: another build or -D flag)
     cc -O2 benches/ab_entry.c -o ab_entry -ldl -lm
     OMP_NUM_THREADS=1 ./ab_entry before.so after.so SIZES INPUTS OUTS REPS

   SIZES are the size arguments in the function's order (`64,128,128`),
   INPUTS the lengths of its real inputs, OUTS those of its result's leaves.
   Prints both best times, their ratio and the largest difference of the two
   results relative to the largest magnitude. No relation inputs. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>
#include <time.h>
typedef int (*entry_t)(const int64_t *, const double *const *, const int64_t *const *, double *const *);
static int parse(const char *s, int64_t *v) { int n = 0; char *e; while (*s) { v[n++] = strtoll(s, &e, 10); s = *e ? e + 1 : e; } return n; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
  entry_t f[2];
  for (int k = 0; k < 2; k++) { void *h = dlopen(argv[1 + k], RTLD_NOW | RTLD_LOCAL); if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; } f[k] = (entry_t)dlsym(h, "atlpacked_entry"); }
  int64_t sz[16], il[16], ol[16]; parse(argv[3], sz); int ni = parse(argv[4], il); int no = parse(argv[5], ol); int reps = atoi(argv[6]);
  double *in[16], *out[2][16]; srand(1);
  for (int i = 0; i < ni; i++) { in[i] = aligned_alloc(64, il[i] * 8 + 64); for (int64_t j = 0; j < il[i]; j++) in[i][j] = 2.0 * rand() / RAND_MAX - 1.0; }
  for (int k = 0; k < 2; k++) for (int i = 0; i < no; i++) { out[k][i] = aligned_alloc(64, ol[i] * 8 + 64); memset(out[k][i], 0, ol[i] * 8); }
  const int64_t *rel[1] = {0};
  double best[2] = {1e9, 1e9};
  for (int r = 0; r < reps; r++) for (int k = 0; k < 2; k++) { double t0 = now(); int rc = f[k](sz, (const double *const *)in, rel, out[k]); double t = now() - t0; if (rc) { fprintf(stderr, "rc %d\n", rc); return 1; } if (t < best[k]) best[k] = t; }
  double md = 0, mx = 0;
  for (int i = 0; i < no; i++) for (int64_t j = 0; j < ol[i]; j++) { double d = fabs(out[0][i][j] - out[1][i][j]); if (d > md) md = d; if (fabs(out[0][i][j]) > mx) mx = fabs(out[0][i][j]); }
  printf("A %.3f ms  B %.3f ms  A/B %.2f  maxreldiff %.1e\n", best[0] * 1e3, best[1] * 1e3, best[0] / best[1], md / (mx > 0 ? mx : 1));
  return 0;
}
