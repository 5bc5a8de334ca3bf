//! The `sexp` output format: core programs as ATL text that reads back with
//! the same meaning and cost (the printer is [`crate::front::print`]); the
//! paper's notation for people is [`super::pretty`].

pub use crate::front::print::{
    expr_to_string, param_to_string, pred_to_string, program_to_string, signature, type_to_string,
};

#[cfg(test)]
mod tests {
    use crate::front::parse_program;

    #[test]
    fn print_then_read_is_identity() {
        let src = b"(fn f ((x (tensor n R)) (S (relation n n)) (p (pair R R)))
          (let y (gen i n (* (get x (- i 1)) (fst p)))
            (sum i n (iverson (and (S i i) (exists k 3 (== (* 2 k) i)) (or (< i 2) (>= i (- n 1))))
              (+ (get y i) (pow (get x i) 2.5))))))";
        let p = parse_program(src).unwrap();
        let text = super::program_to_string(&p);
        // binder names are printed readable (the second `i` as `i1`), so the
        // text, not the tree, is the fixed point
        let q = parse_program(text.as_bytes()).unwrap();
        assert_eq!(text, super::program_to_string(&q));
        assert!(text.contains("(sum i1 n"), "{text}");
    }
}
