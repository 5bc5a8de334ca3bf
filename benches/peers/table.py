"""Markdown tables from the results of bench.py (one JSON per thread mode)."""

SYSTEMS = (("atl", "atl-egg"), ("jax", "JAX jit"), ("torch", "PyTorch"))


def fmt_time(t):
    if t is None:
        return "—"
    if t < 1e-3:
        return "%.3g µs" % (t * 1e6)
    if t < 1.0:
        return "%.3g ms" % (t * 1e3)
    return "%.3g s" % t


def fmt_ratio(r):
    if r is None:
        return "—"
    if r >= 100:
        return "%d" % round(r)
    return "%.2g" % r


def _t(row, key, stat):
    t = row["t"].get(key, {})
    return t.get(stat)


def _ratio(a, b):
    return a / b if a is not None and b is not None and b > 0 else None


def times_table(results, stat="best"):
    """Per program and size: t_f, t_grad and t_grad/t_f of each system, and
    how many times slower the peers' gradients are than atl-egg's."""
    head = ["program", "size"]
    for _, name in SYSTEMS:
        head += [name + " f", name + " grad", "grad/f"]
    head += ["JAX grad ÷ atl-egg grad", "PyTorch grad ÷ atl-egg grad"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for prog in results["programs"]:
        for row in prog["sizes"]:
            cells = [prog["name"], row["label"]]
            for s, _ in SYSTEMS:
                f, g = _t(row, s + ".f", stat), _t(row, s + ".grad", stat)
                cells += [fmt_time(f), fmt_time(g), fmt_ratio(_ratio(g, f))]
            atl_g = _t(row, "atl.grad", stat)
            for s in ("jax", "torch"):
                cells.append(fmt_ratio(_ratio(_t(row, s + ".grad", stat), atl_g)))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def first_call_table(results):
    """Compile and first-call times, and the cross-check."""
    head = [
        "program",
        "atl-egg compile f / grad",
        "largest size",
        "JAX first call f / grad",
        "PyTorch first call f / grad",
        "check: atl-egg vs JAX",
        "check: PyTorch vs JAX",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for prog in results["programs"]:
        c = prog["atl_compile"]
        row = prog["sizes"][-1] if prog["sizes"] else {"t": {}, "label": "—"}
        chk = prog["check"]

        def pair(s):
            return "%s / %s" % (fmt_time(_t(row, s + ".f", "first")), fmt_time(_t(row, s + ".grad", "first")))

        lines.append(
            "| %s | %s / %s | %s | %s | %s | %.1e%s | %.1e%s |"
            % (
                prog["name"],
                fmt_time(c["f"]),
                fmt_time(c["grad"]),
                row["label"],
                pair("jax"),
                pair("torch"),
                chk["err"]["atl"],
                "" if chk["err"]["atl"] <= 1e-8 else " **FAIL**",
                chk["err"]["torch"],
                "" if chk["err"]["torch"] <= 1e-8 else " **FAIL**",
            )
        )
    return "\n".join(lines)


def threads_table(single, multi, stat="best"):
    """Per program and size: atl-egg's gradient on one thread and on all,
    its speed-up from threads, and JAX's and PyTorch's gradients on all
    threads against atl-egg's."""
    head = ["program", "size", "atl-egg grad, 1 thread", "atl-egg grad, all threads",
            "atl-egg speed-up from threads", "JAX grad, all threads", "JAX ÷ atl-egg (all threads)",
            "PyTorch ÷ atl-egg (all threads)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows_multi = {(p["name"], r["label"]): r for p in multi["programs"] for r in p["sizes"]}
    for prog in single["programs"]:
        for row in prog["sizes"]:
            other = rows_multi.get((prog["name"], row["label"]))
            if other is None:
                continue
            one, all_ = _t(row, "atl.grad", stat), _t(other, "atl.grad", stat)
            jax_all, torch_all = _t(other, "jax.grad", stat), _t(other, "torch.grad", stat)
            lines.append("| " + " | ".join([
                prog["name"], row["label"], fmt_time(one), fmt_time(all_),
                fmt_ratio(_ratio(one, all_)), fmt_time(jax_all),
                fmt_ratio(_ratio(jax_all, all_)), fmt_ratio(_ratio(torch_all, all_)),
            ]) + " |")
    return "\n".join(lines)


def skipped(results):
    out = []
    for prog in results["programs"]:
        for row in prog["sizes"]:
            for key, t in sorted(row["t"].items()):
                if "skipped" in t:
                    out.append("- %s %s %s: skipped, %s" % (prog["name"], row["label"], key, t["skipped"]))
    return "\n".join(out)


def render(all_results, command, medians=True):
    """The whole report: one section per thread mode."""
    parts = []
    for res in all_results:
        mode = "single-threaded" if res["threads"] == "1" else "all threads (%d)" % res["torch_threads"]
        parts.append("### %s: best of repeated calls after warm-up\n" % mode.capitalize())
        parts.append(times_table(res, "best") + "\n")
        if medians:
            parts.append("### %s: median of the same calls\n" % mode.capitalize())
            parts.append(times_table(res, "median") + "\n")
        parts.append("### %s: compile, first call, cross-check (relative, at a small size)\n" % mode.capitalize())
        parts.append(first_call_table(res) + "\n")
        overhead = res.get("atl_call_overhead")
        if overhead:
            parts.append("atl-egg's call overhead (the atl_egg package's binding, checks and output "
                         "allocation around the compiled code): best %s, median %s.\n"
                         % (fmt_time(overhead["best"]), fmt_time(overhead["median"])))
        sk = skipped(res)
        if sk:
            parts.append("Skipped (a size whose predicted time exceeds the run's limits):\n\n" + sk + "\n")
    single = [r for r in all_results if r["threads"] == "1"]
    multi = [r for r in all_results if r["threads"] != "1"]
    if single and multi:
        parts.append("### Threads: gradients on one thread and on all, best of repeated calls\n")
        parts.append(threads_table(single[0], multi[0]) + "\n")
    v = all_results[0]["versions"] if all_results else {}
    parts.append(
        "Regenerate with `%s` (JAX %s, PyTorch %s, NumPy %s; float64 everywhere)."
        % (command, v.get("jax"), v.get("torch"), v.get("numpy"))
    )
    return "\n".join(parts) + "\n"
