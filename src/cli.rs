//! The `atl-egg` command line (ATL.md, "The command line").
//!
//! Exit status: 0 on success, 1 for any error about the program or its
//! inputs (with a located message on stderr), 2 for a bad command line.
//! Every command runs on a large stack ([`atl_egg::with_big_stack`]) because
//! all passes recurse over the program and programs may nest 100,000 deep.

use atl_egg::error::{Error, ErrorKind, Result};
use atl_egg::front::{self, Program};
use atl_egg::semantics::{cost, eval, value};
use atl_egg::{derive, egraph};
use clap::{Args, Parser, Subcommand};
use std::io::Read;

#[derive(Parser, Debug)]
#[command(
    name = "atl-egg",
    version,
    about = "Differentiate and optimize A Tensor Language (ATL) programs by equality saturation"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct FileArg {
    /// The program file, or `-` for standard input.
    pub file: String,
}

#[derive(Args, Debug, Clone)]
pub struct SizesArg {
    /// Sizes, as `n=4,m=3`; a size not given is taken from an input whose
    /// dimension is exactly that size name.
    #[arg(long)]
    pub sizes: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Type-check a program and print its signature.
    Check(FileArg),
    /// Evaluate a program on JSON inputs and print the result as JSON.
    Eval {
        #[command(flatten)]
        file: FileArg,
        /// A JSON file holding an object from parameter names to values.
        #[arg(long)]
        inputs: String,
        #[command(flatten)]
        sizes: SizesArg,
    },
    /// Print the paper's work cost of a program (last line: the integer).
    Cost {
        #[command(flatten)]
        file: FileArg,
        #[command(flatten)]
        sizes: SizesArg,
        /// Inputs (needed for relation values and to infer sizes).
        #[arg(long)]
        inputs: Option<String>,
        /// Print the input/output cost (cost + size of inputs and output).
        #[arg(long)]
        io: bool,
    },
    /// Optimize a program by equality saturation; prints core forms.
    Optimize {
        #[command(flatten)]
        file: FileArg,
        #[command(flatten)]
        opt: OptArgs,
    },
    /// The gradient of a function returning R (reverse mode), optimized.
    Grad(DeriveArgs),
    /// Jacobian-vector product (forward mode): extra tangent parameters.
    Jvp(DeriveArgs),
    /// Vector-Jacobian product (reverse mode): an extra cotangent parameter.
    Vjp(DeriveArgs),
    /// Hessian-vector product (forward over reverse): extra directions.
    Hvp(DeriveArgs),
    /// Compile a program to native code: C source (`-o F.c`, or standard
    /// output without `-o`), a shared library (`.so`) or its manifest (`.json`).
    Compile {
        #[command(flatten)]
        file: FileArg,
        /// Output file; its extension says what to write.
        #[arg(short = 'o', long = "output")]
        output: Option<String>,
    },
    /// Compile (cached), run on JSON inputs and print the result as JSON.
    Run {
        #[command(flatten)]
        file: FileArg,
        /// A JSON file holding an object from parameter names to values.
        #[arg(long)]
        inputs: String,
        #[command(flatten)]
        sizes: SizesArg,
        /// Run N times; print the best and median time on stderr.
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Run an instrumented build; the last line of stderr is
        /// `ops: ADDS MULS CALLS`.
        #[arg(long)]
        count_ops: bool,
    },
}

#[derive(Args, Debug, Clone)]
pub struct DeriveArgs {
    #[command(flatten)]
    pub file: FileArg,
    /// Inputs to differentiate, comma-separated (default: every real input).
    #[arg(long)]
    pub wrt: Option<String>,
    #[command(flatten)]
    pub opt: OptArgs,
}

impl DeriveArgs {
    fn wrt(&self) -> Result<Vec<egg::Symbol>> {
        let Some(w) = &self.wrt else {
            return Ok(vec![]);
        };
        let names: Vec<&str> = w.split(',').map(str::trim).collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(Error::usage(format!(
                "--wrt {w}: expected names separated by commas"
            )));
        }
        Ok(names.into_iter().map(egg::Symbol::from).collect())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// ATL S-expressions, core forms only (reads back with `check -`).
    Sexp,
    /// A JSON object: program, costs, e-graph size, iterations, stop reason.
    Json,
    /// The paper's notation, for people.
    Pretty,
}

#[derive(Args, Debug, Clone)]
pub struct OptArgs {
    /// Sizes to compare costs at (after the large default sample).
    #[command(flatten)]
    pub sizes: SizesArg,
    /// Print statistics (phases, e-graph size, stop reasons) on stderr.
    #[arg(long)]
    pub stats: bool,
    #[arg(long, value_enum, default_value = "sexp")]
    pub format: Format,
    /// Most e-nodes per phase.
    #[arg(long, default_value_t = 10_000)]
    pub node_limit: usize,
    /// Most iterations per phase.
    #[arg(long, default_value_t = 30)]
    pub iter_limit: usize,
    /// Seconds for the whole optimization.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
}

impl OptArgs {
    pub fn options(&self) -> Result<egraph::Options> {
        if !(self.time_limit.is_finite() && self.time_limit > 0.0 && self.time_limit < 1e6) {
            return Err(Error::usage(
                "--time-limit must be a positive number of seconds",
            ));
        }
        Ok(egraph::Options {
            node_limit: self.node_limit,
            iter_limit: self.iter_limit,
            time_limit: std::time::Duration::from_secs_f64(self.time_limit),
            sizes: self
                .sizes
                .sizes
                .as_deref()
                .map(value::parse_sizes_flag)
                .transpose()?,
        })
    }
}

/// Print an optimized program in the chosen format (stats on stderr).
fn render(prog: &Program, stats: &egraph::Stats, opt: &OptArgs) -> Result<String> {
    if opt.stats {
        eprintln!(
            "{}",
            serde_json::to_string_pretty(stats).unwrap_or_else(|e| e.to_string())
        );
    }
    Ok(match opt.format {
        Format::Sexp => front::print::program_to_string(prog),
        Format::Pretty => front::print::program_to_pretty(prog),
        Format::Json => {
            let v = serde_json::json!({
                "program": front::print::program_to_string(prog),
                "stats": stats,
            });
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
        }
    })
}

fn read_source(path: &str) -> Result<Vec<u8>> {
    if path == "-" {
        let mut buf = vec![];
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Error::input(format!("cannot read standard input: {e}")))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| Error::input(format!("cannot read {path}: {e}")))
    }
}

pub fn load_program(path: &str) -> Result<Program> {
    let text = read_source(path)?;
    front::parse_program(&text)
}

fn read_json(path: &str) -> Result<serde_json::Value> {
    let text = std::fs::read(path).map_err(|e| Error::input(format!("cannot read {path}: {e}")))?;
    serde_json::from_slice(&text).map_err(|e| Error::input(format!("{path}: malformed JSON: {e}")))
}

/// Sizes from `--sizes` and the inputs, then the inputs themselves.
fn inputs_for(
    prog: &Program,
    sizes: &SizesArg,
    inputs: Option<&str>,
    require_reals: bool,
) -> Result<value::Inputs> {
    let given = match &sizes.sizes {
        Some(s) => value::parse_sizes_flag(s)?,
        None => value::Sizes::default(),
    };
    let json = inputs.map(read_json).transpose()?;
    let resolved = value::resolve_sizes(prog, &given, json.as_ref())?;
    let empty = serde_json::Value::Object(Default::default());
    value::inputs_from_json(
        prog,
        json.as_ref().unwrap_or(&empty),
        &resolved,
        require_reals,
    )
}

/// Run a command; returns what to print on stdout.
pub fn run(cmd: Command) -> Result<String> {
    let which = match &cmd {
        Command::Grad(_) => "grad",
        Command::Jvp(_) => "jvp",
        Command::Vjp(_) => "vjp",
        Command::Hvp(_) => "hvp",
        _ => "",
    };
    match cmd {
        Command::Check(f) => {
            let prog = load_program(&f.file)?;
            Ok(front::print::signature(&prog) + "\n")
        }
        Command::Eval {
            file,
            inputs,
            sizes,
        } => {
            let prog = load_program(&file.file)?;
            let inputs = inputs_for(&prog, &sizes, Some(&inputs), true)?;
            let v = eval::evaluate(&prog, &inputs)?;
            Ok(value::value_to_json_string(&v, &prog.ret, &inputs.sizes)? + "\n")
        }
        Command::Cost {
            file,
            sizes,
            inputs,
            io,
        } => {
            let prog = load_program(&file.file)?;
            let inputs = inputs_for(&prog, &sizes, inputs.as_deref(), false)?;
            let c = if io {
                cost::io_cost(&prog, &inputs.sizes, &inputs.relations)?
            } else {
                cost::cost(&prog, &inputs.sizes, &inputs.relations)?
            };
            Ok(format!("{c}\n"))
        }
        Command::Optimize { file, opt } => {
            let prog = load_program(&file.file)?;
            let out = egraph::optimize(&prog, &opt.options()?)?;
            render(&out.program, &out.stats, &opt)
        }
        Command::Grad(a) | Command::Jvp(a) | Command::Vjp(a) | Command::Hvp(a) => {
            let prog = load_program(&a.file.file)?;
            let wrt = a.wrt()?;
            let opts = a.opt.options()?;
            let out = match which {
                "grad" => derive::grad(&prog, &wrt, &opts)?,
                "jvp" => derive::jvp(&prog, &wrt, &opts)?,
                "vjp" => derive::vjp(&prog, &wrt, &opts)?,
                _ => derive::hvp(&prog, &wrt, &opts)?,
            };
            render(&out.program, &out.stats, &a.opt)
        }
        Command::Compile { file, output } => compile_cmd(&file.file, output.as_deref()),
        Command::Run {
            file,
            inputs,
            sizes,
            repeat,
            count_ops,
        } => run_cmd(&file.file, &inputs, &sizes, repeat, count_ops),
    }
}

/// `compile FILE [-o OUT]`.
fn compile_cmd(file: &str, output: Option<&str>) -> Result<String> {
    use atl_egg::backend;
    let prog = load_program(file)?;
    let src = backend::generate(&prog)?;
    let Some(out) = output else {
        return Ok(src.source);
    };
    let write = |bytes: &[u8]| {
        std::fs::write(out, bytes).map_err(|e| Error::input(format!("cannot write {out}: {e}")))
    };
    match std::path::Path::new(out)
        .extension()
        .and_then(|e| e.to_str())
    {
        Some("c") => write(src.source.as_bytes())?,
        Some("json") => write(
            (serde_json::to_string_pretty(&src.manifest).unwrap_or_default() + "\n").as_bytes(),
        )?,
        Some("so") => {
            let lib = backend::build::shared_library(
                &src.source,
                false,
                &backend::build::Flags::default(),
            )?;
            std::fs::copy(&lib, out)
                .map_err(|e| Error::input(format!("cannot write {out}: {e}")))?;
        }
        _ => {
            return Err(Error::usage(format!(
                "-o {out}: the extension must be .c, .so or .json"
            )))
        }
    }
    Ok(String::new())
}

/// `run FILE --inputs J [--sizes S] [--repeat N] [--count-ops]`.
fn run_cmd(
    file: &str,
    inputs: &str,
    sizes: &SizesArg,
    repeat: usize,
    count_ops: bool,
) -> Result<String> {
    if repeat == 0 {
        return Err(Error::usage("--repeat must be at least 1"));
    }
    let prog = load_program(file)?;
    let inputs = inputs_for(&prog, sizes, Some(inputs), true)?;
    let compiled = atl_egg::backend::compile_with(&prog, count_ops)?;
    let (v, ops, mut times) = compiled.call_timed(&inputs, repeat)?;
    let text = value::value_to_json_string(&v, &prog.ret, &inputs.sizes)? + "\n";
    if repeat > 1 {
        times.sort_by(f64::total_cmp);
        eprintln!(
            "time: best {:.3e} s, median {:.3e} s ({repeat} runs)",
            times[0],
            times[times.len() / 2]
        );
    }
    if let Some([a, m, c]) = ops {
        eprintln!("ops: {a} {m} {c}");
    }
    Ok(text)
}

/// Exit status for an error: 2 for usage errors, 1 otherwise.
pub fn exit_code(e: &Error) -> i32 {
    if e.kind == ErrorKind::Usage {
        2
    } else {
        1
    }
}
