//! `--stats`: a short summary for people, the full record as JSON, and a
//! warning whenever a limit stopped a phase early.

use atl_egg::egraph::extract::UNUSABLE;
use atl_egg::egraph::runner::PhaseStats;
use atl_egg::optimizer::Stats;
use atl_egg::semantics::sizes::Sizes;

/// A cost as JSON: `null` where the program is not defined at those sizes
/// (a negative dimension), which the optimizer counts as unusable.
fn cost_json(c: u128) -> serde_json::Value {
    if c >= UNUSABLE {
        serde_json::Value::Null
    } else if let Ok(k) = u64::try_from(c) {
        serde_json::json!(k)
    } else {
        serde_json::json!(c.to_string())
    }
}

/// Costs before and after at each sample, one entry per distinct sample
/// (samples repeat when the program has relations, tested full, sparse
/// and empty: identical entries are kept once).
fn costs(stats: &Stats) -> Vec<(String, u128, Option<u128>)> {
    let mut out: Vec<(String, u128, Option<u128>)> = vec![];
    for (k, (label, before)) in stats.cost_before.iter().enumerate() {
        let after = stats
            .cost_after
            .get(k)
            .filter(|(l, _)| l == label)
            .map(|(_, c)| *c);
        let entry = (label.clone(), *before, after);
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

/// The full statistics as JSON, without repetitions: phases, then one entry
/// per sample with the cost before and after.
pub fn to_json(stats: &Stats) -> serde_json::Value {
    let costs: Vec<serde_json::Value> = costs(stats)
        .into_iter()
        .map(|(sizes, before, after)| {
            serde_json::json!({
                "sizes": sizes,
                "before": cost_json(before),
                "after": after.map(cost_json).unwrap_or(serde_json::Value::Null),
            })
        })
        .collect();
    serde_json::json!({
        "phases": stats.phases,
        "costs": costs,
        "kept_input": stats.kept_input,
        "seconds": stats.seconds,
    })
}

/// The same record as [`to_json`], laid out for people to read too: one
/// phase or one sample a line, fields in a fixed order.
pub fn to_json_text(stats: &Stats) -> String {
    let phases: Vec<String> = stats
        .phases
        .iter()
        .map(|p| format!("    {}", json(p)))
        .collect();
    let costs: Vec<String> = costs(stats)
        .into_iter()
        .map(|(sizes, before, after)| {
            format!(
                "    {{\"sizes\": {}, \"before\": {}, \"after\": {}}}",
                json(&sizes),
                cost_json(before),
                after.map(cost_json).unwrap_or(serde_json::Value::Null)
            )
        })
        .collect();
    format!(
        "{{\n  \"phases\": [\n{}\n  ],\n  \"costs\": [\n{}\n  ],\n  \"kept_input\": {},\n  \"seconds\": {}\n}}",
        phases.join(",\n"),
        costs.join(",\n"),
        stats.kept_input,
        json(&stats.seconds)
    )
}

/// Compact JSON text.
fn json<T: serde::Serialize + ?Sized>(x: &T) -> String {
    serde_json::to_string(x).unwrap_or_default()
}

fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// The short summary: a table of phases, then the cost before → after at
/// the user's sizes (`--sizes`), else at the first (largest) sample.
pub fn summary(stats: &Stats, user_sizes: Option<&str>) -> String {
    let mut s = String::new();
    let w = stats
        .phases
        .iter()
        .map(|p| p.phase.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    s += &format!(
        "{:<w$}  {:>5}  {:>8}  {:>9}  {}\n",
        "phase", "iters", "e-nodes", "time", "stopped by"
    );
    for p in &stats.phases {
        s += &format!(
            "{:<w$}  {:>5}  {:>8}  {:>9}  {}\n",
            p.phase,
            p.iterations,
            p.nodes,
            seconds(p.seconds),
            p.stop_reason
        );
    }
    let all = costs(stats);
    // size sets compare as maps: `m=3,n=4` is the sample `n=4,m=3`
    let want = user_sizes.map(|s| s.parse::<Sizes>().ok());
    let pick = match &want {
        Some(w) => all.iter().find(|(l, _, _)| l.parse::<Sizes>().ok() == *w),
        None => all.first(),
    };
    let show = |c: u128| {
        if c >= UNUSABLE {
            "undefined".to_string()
        } else {
            c.to_string()
        }
    };
    if let Some((label, before, after)) = pick {
        let after = after.map(show).unwrap_or_else(|| "?".into());
        let which = if want.is_some() || label.is_empty() {
            String::new()
        } else {
            " (a default sample; --sizes gives yours)".to_string()
        };
        // a program without sizes has one cost
        let at = if label.is_empty() {
            String::new()
        } else {
            format!(" at {label}")
        };
        s += &format!("cost{at}: {} → {after}{which}\n", show(*before));
    }
    if stats.kept_input {
        s += "the optimizer's result was not cheaper; the input program is kept\n";
    }
    s += &format!("total {}\n", seconds(stats.seconds));
    s
}

/// The flag that raises the limit that stopped `p`, if a flag does.
fn limit_flag(p: &PhaseStats) -> Option<(&'static str, &'static str)> {
    let r = p.stop_reason.as_str();
    let differentiation = p.phase.starts_with("differentiat");
    if r.starts_with("time limit") {
        Some(("time", "--time-limit"))
    } else if r.starts_with("node limit") {
        Some(("node", if differentiation { "" } else { "--node-limit" }))
    } else if r.starts_with("iteration limit") {
        Some((
            "iteration",
            if differentiation { "" } else { "--iter-limit" },
        ))
    } else {
        None
    }
}

/// One line per phase that a limit stopped early, when a flag raises it.
pub fn limit_warnings(stats: &Stats) -> Vec<String> {
    stats
        .phases
        .iter()
        .filter_map(|p| {
            let (what, flag) = limit_flag(p)?;
            if p.phase.contains("(whole,") {
                // the optimizer's second look at a small program as a
                // whole: the per-binding result before it is complete
                return None;
            }
            if flag.is_empty() {
                // a fixed limit of the differentiation phase: no flag helps,
                // and its result is complete (it has no extension forms);
                // `--stats` shows it
                return None;
            }
            // "iteration limit (30)" -> "30"
            let r = p.stop_reason.as_str();
            let at = r.find('(').map_or(r, |k| r[k + 1..].trim_end_matches(')'));
            Some(format!(
                "the {} phase stopped at the {what} limit ({at}); raise {flag} to let it finish",
                p.phase
            ))
        })
        .collect()
}
