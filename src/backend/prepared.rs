//! Relations prepared once for many calls: the C entry points of a
//! library whose function takes relations.
//!
//! A body that walks a relation with its arguments permuted (`(E j i)`
//! beside `(E i j)`) reads a permuted layout, which the public function
//! builds in every call ([`super::c`]). A caller that calls the function
//! many times on one relation (a fixed graph in a training loop or a
//! solver) prepares it once instead:
//!
//! * `void *atlpacked_prepare(int64_t k, const int64_t *sz, const int64_t
//!   *layout, int64_t len, int *rc)`: for the `k`-th relation parameter, at
//!   the sizes `sz` (in the manifest's order; only the relation's own
//!   dimensions are read), checks that the `len` words of `layout` are a
//!   valid compressed layout of those dimensions (positions ascending,
//!   coordinates in range and strictly ascending in every fibre, no empty
//!   fibre below the first level), copies it and builds the permuted
//!   layouts the body needs of it (the calls of `atlh_rel_permute` the
//!   public function makes). Returns the prepared relation, which owns its
//!   copies, or NULL with `*rc` set ([`RET_PREPARED`] for an invalid
//!   layout or parameter, else the function's codes).
//! * `void atlpacked_prepared_free(void *p)`.
//! * `int atlpacked_entry_prepared(sz, re, rel, prep, out)`: `atlpacked_entry`
//!   with, for each relation parameter, a prepared relation or NULL (then
//!   `rel[k]` is used and its permuted layouts built in the call). A
//!   prepared relation must have been made by this library for the same
//!   parameter and the same dimensions at the call's sizes, and `rel[k]`
//!   must be NULL or its own copy ([`RET_PREPARED`] otherwise): the body
//!   always reads the relation the layouts were built from. Nothing is
//!   looked up by address or content; a prepared relation is what its
//!   caller holds, and it cannot go stale (its source is copied).

use super::c::{check_call, dim_form, packed_args, RET_ALLOCATION, RET_INDEX_OVERFLOW};
use crate::front::affine::Affine;
use crate::lower::ir::{Function, ParamC};
use std::fmt::Write as _;

/// A prepared relation was not made by this library for this parameter
/// and these dimensions, or the layout given to prepare is not valid.
pub const RET_PREPARED: i32 = 5;
/// The message for [`RET_PREPARED`].
pub const PREPARED_MESSAGE: &str = "a prepared relation does not belong to this function, \
parameter and sizes, or the layout to prepare is not a valid compressed layout";

/// The C helpers of the prepared entry points.
const HELPERS: &str = r#"
/* A relation prepared for this library's function (atlpacked_prepare):
   its parameter, dimensions, its own copy of the layout and the permuted
   layouts the body reads of it. owner is the address of atlh_prep_owner,
   which is this library's own. */
typedef struct {
  const void *owner;
  int64_t param, arity;
  int64_t dims[16];
  int64_t *layout;
  int64_t nperm;
  int64_t *perm[];
} atlh_prepared;
static const char atlh_prep_owner = 0;
/* Is r (len words) a compressed layout of arity k within dims, in the
   form the library's layouts have (see atlh_rel_walk)? Linear in len and
   the first dimension. */
static int atlh_rel_valid(const int64_t *r, int64_t len, int64_t k, const int64_t *dims) {
  if (k < 1 || k > 16 || len < 2 + 2 * k || r[0] != k || r[1] < 0) return 0;
  const int64_t start = k >= 2 ? 1 : 0;
  int64_t parents = start ? dims[0] : 1;
  for (int64_t l = start; l < k; l++) {
    const int64_t po = r[2 + 2 * l], co = r[3 + 2 * l];
    if (po < 2 + 2 * k || po >= len || parents > len - po - 1) return 0;
    const int64_t *pos = r + po;
    if (pos[0] != 0) return 0;
    for (int64_t p = 0; p < parents; p++)
      if (pos[p + 1] < pos[p] || (l > start && pos[p + 1] == pos[p])) return 0;
    const int64_t n = pos[parents];
    if (co < 2 + 2 * k || co > len || n > len - co) return 0;
    const int64_t *crd = r + co;
    for (int64_t p = 0; p < parents; p++)
      for (int64_t q = pos[p]; q < pos[p + 1]; q++)
        if (crd[q] < 0 || crd[q] >= dims[l] || (q > pos[p] && crd[q] <= crd[q - 1])) return 0;
    parents = n;
  }
  return parents == r[1];
}
void atlpacked_prepared_free(void *p) {
  atlh_prepared *h = (atlh_prepared *)p;
  if (h == NULL) return;
  for (int64_t j = 0; j < h->nperm; j++) free(h->perm[j]);
  free(h->layout);
  free(h);
}
/* The prepared relation of parameter param (arity k, dimensions dims) from
   the layout r of len words, with nperm permuted layouts: the j-th has
   dimensions pdims[j] and permutation perms[j]. NULL with *rc set. */
static void *atlh_prepare(int *rc, int64_t param, int64_t k, const int64_t *dims, const int64_t *r, int64_t len,
                          int64_t nperm, const int64_t *const *pdims, const int *const *perms) {
  for (int64_t j = 0; j < k; j++) if (dims[j] < 0) { *rc = 1; return NULL; }
  if (r == NULL || !atlh_rel_valid(r, len, k, dims)) { *rc = 5; return NULL; }
  atlh_prepared *h = (atlh_prepared *)calloc(1, sizeof(atlh_prepared) + sizeof(int64_t *) * (size_t)(nperm + 1));
  if (h == NULL) { *rc = 2; return NULL; }
  h->param = param; h->arity = k;
  for (int64_t j = 0; j < k; j++) h->dims[j] = dims[j];
  h->layout = (int64_t *)malloc(sizeof(int64_t) * (size_t)len);
  if (h->layout == NULL) { atlpacked_prepared_free(h); *rc = 2; return NULL; }
  for (int64_t q = 0; q < len; q++) h->layout[q] = r[q];
  for (int64_t j = 0; j < nperm; j++) {
    h->perm[j] = atlh_rel_permute(h->layout, pdims[j], perms[j], 0);
    h->nperm = j + 1;
    if (h->perm[j] == NULL) { atlpacked_prepared_free(h); *rc = 2; return NULL; }
  }
  h->owner = &atlh_prep_owner;
  *rc = 0;
  return h;
}
/* 0 when p was prepared by this library for parameter param with the
   dimensions dims, and r is NULL or p's own layout; else 5. */
static int atlh_prepared_check(const atlh_prepared *p, int64_t param, const int64_t *r, const int64_t *dims) {
  if (p->owner != &atlh_prep_owner || p->param != param) return 5;
  if (r != NULL && r != p->layout) return 5;
  for (int64_t j = 0; j < p->arity; j++) if (p->dims[j] != dims[j]) return 5;
  return 0;
}
"#;

/// The relation parameters: index among the relations, C name, dimensions.
fn relations(f: &Function) -> Vec<(usize, &str, &[Affine])> {
    f.params
        .iter()
        .filter_map(|p| match &p.kind {
            ParamC::Relation(d) => Some((p.cname.as_str(), d.as_slice())),
            _ => None,
        })
        .enumerate()
        .map(|(k, (c, d))| (k, c, d))
        .collect()
}

/// The sizes as locals named as the function's size parameters, read from
/// the packed array `sz`.
fn size_locals(out: &mut String, f: &Function) {
    for (k, p) in f
        .params
        .iter()
        .filter(|p| p.kind == ParamC::Size)
        .enumerate()
    {
        let _ = writeln!(out, "  const int64_t {0} = sz[{k}];\n  (void){0};", p.cname);
    }
}

/// `const int64_t NAME[] = {...};` of the dimensions `dims`, each form
/// checked first (`fail` is the statement run when one overflows, given
/// the return code).
fn dims_local(out: &mut String, f: &Function, name: &str, dims: &[Affine], fail: &str) {
    let mut values = vec![];
    for d in dims {
        let (value, check) = dim_form(d, f);
        let _ = writeln!(
            out,
            "  if (!{}) {}",
            check_call(&check),
            fail.replace("RC", &RET_INDEX_OVERFLOW.to_string())
        );
        values.push(format!("({value})"));
    }
    let _ = writeln!(out, "  const int64_t {name}[] = {{{}}};", values.join(", "));
}

/// The C of the prepared entry points, for a function with relation
/// parameters (empty otherwise).
pub fn emit(f: &Function) -> String {
    if relations(f).is_empty() {
        return String::new();
    }
    let mut out = String::from(HELPERS);
    builder(&mut out, f);
    entry(&mut out, f);
    out
}

/// `atlpacked_prepare`: one branch per relation parameter.
fn builder(out: &mut String, f: &Function) {
    out.push_str("\nvoid *atlpacked_prepare(int64_t atlv_which, const int64_t *sz, const int64_t *atlv_layout, int64_t atlv_len, int *atlv_rc) {\n  int atlv_ignored;\n  if (atlv_rc == NULL) atlv_rc = &atlv_ignored;\n  *atlv_rc = 5;\n  if (sz == NULL) return NULL;\n");
    size_locals(out, f);
    for (k, cname, dims) in relations(f) {
        let _ = writeln!(out, "  if (atlv_which == {k}) {{");
        let fail = "{ *atlv_rc = RC; return NULL; }";
        dims_local(out, f, "atlv_d", dims, fail);
        let mine: Vec<_> = f.permuted.iter().filter(|p| p.of == cname).collect();
        let mut pdims = vec![];
        let mut perms = vec![];
        for (j, p) in mine.iter().enumerate() {
            dims_local(out, f, &format!("atlv_pd{j}"), &p.dims, fail);
            pdims.push(format!("atlv_pd{j}"));
            let perm: Vec<String> = p.perm.iter().map(|x| x.to_string()).collect();
            perms.push(format!("(const int[]){{{}}}", perm.join(", ")));
        }
        pdims.push("NULL".into());
        perms.push("NULL".into());
        let _ = writeln!(
            out,
            "  const int64_t *const atlv_pds[] = {{{}}};\n  const int *const atlv_perms[] = {{{}}};",
            pdims.join(", "),
            perms.join(", ")
        );
        let _ = writeln!(
            out,
            "  return atlh_prepare(atlv_rc, {k}, {}, atlv_d, atlv_layout, atlv_len, {}, atlv_pds, atlv_perms);\n  }}",
            dims.len(),
            mine.len()
        );
    }
    out.push_str("  return NULL;\n}\n");
}

/// `atlpacked_entry_prepared`: each relation from its prepared form
/// (checked) or given, each permuted layout from the prepared form or
/// built in the call, then the body.
fn entry(out: &mut String, f: &Function) {
    out.push_str("\nint atlpacked_entry_prepared(const int64_t *sz, const double *const *re, const int64_t *const *rel, void *const *prep, double *const *out) {\n  (void)re; (void)out;\n");
    size_locals(out, f);
    let rels = relations(f);
    for (k, _, dims) in &rels {
        let _ = writeln!(
            out,
            "  const atlh_prepared *atlv_p{k} = (const atlh_prepared *)prep[{k}];\n  if (atlv_p{k} != NULL) {{"
        );
        dims_local(out, f, &format!("atlv_d{k}"), dims, "return RC;");
        let _ = writeln!(
            out,
            "  const int atlv_c{k} = atlh_prepared_check(atlv_p{k}, {k}, rel[{k}], atlv_d{k});\n  if (atlv_c{k} != 0) return atlv_c{k};\n  }}\n  const int64_t *atlv_r{k} = atlv_p{k} != NULL ? atlv_p{k}->layout : rel[{k}];"
        );
    }
    // each permuted layout: the prepared one, or built now
    let mut built = vec![];
    for (j, p) in f.permuted.iter().enumerate() {
        let (k, _, _) = rels
            .iter()
            .find(|(_, c, _)| *c == p.of)
            .expect("a relation");
        let jj = f.permuted[..j].iter().filter(|q| q.of == p.of).count();
        let free: String = built
            .iter()
            .map(|b| format!("atlh_layout_free({b}, 1); "))
            .collect();
        let _ = writeln!(
            out,
            "  int64_t *atlv_b{j} = NULL;\n  if (atlv_p{k} == NULL) {{"
        );
        dims_local(
            out,
            f,
            "atlv_pd",
            &p.dims,
            &format!("{{ {free}return RC; }}"),
        );
        let perm: Vec<String> = p.perm.iter().map(|x| x.to_string()).collect();
        let _ = writeln!(
            out,
            "  for (int atlv_i = 0; atlv_i < {}; atlv_i++) if (atlv_pd[atlv_i] < 0) {{ {free}return 1; }}\n  atlv_b{j} = atlh_rel_permute(atlv_r{k}, atlv_pd, (const int[]){{{}}}, 1);\n  if (atlv_b{j} == NULL) {{ {free}return {RET_ALLOCATION}; }}\n  }}\n  const int64_t *atlv_q{j} = atlv_p{k} != NULL ? atlv_p{k}->perm[{jj}] : atlv_b{j};",
            p.dims.len(),
            perm.join(", ")
        );
        built.push(format!("atlv_b{j}"));
    }
    let mut call = packed_args(f, |_, cname| cname.to_string(), |k| format!("atlv_r{k}"));
    call.extend((0..f.permuted.len()).map(|j| format!("atlv_q{j}")));
    call.extend((0..f.outputs.len()).map(|k| format!("out[{k}]")));
    let callee = if f.permuted.is_empty() {
        f.name.clone()
    } else {
        format!("{}_body", f.name)
    };
    let _ = writeln!(out, "  const int atlv_rc = {callee}({});", call.join(", "));
    for b in &built {
        let _ = writeln!(out, "  atlh_layout_free({b}, 1);");
    }
    out.push_str("  return atlv_rc;\n}\n");
}
