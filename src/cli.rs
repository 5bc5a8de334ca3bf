//! The `atl-egg` command line (docs/cli.md).
//!
//! Exit status: 0 on success, 1 for any error about the program or its
//! inputs (with a report on stderr: file, line:column, the source line, a
//! hint), 2 for a bad command line.
//! Every command runs on a stack sized by its program's depth
//! ([`atl_egg::with_stack_for`]) because all passes recurse over the program
//! and programs may nest 100,000 deep.

use crate::cli_stats;
use atl_egg::error::{Error, ErrorKind, Result};
use atl_egg::front::Program;
use atl_egg::semantics::arrays::Arrays;
use atl_egg::semantics::{cost, eval, json, sizes, value};
use atl_egg::{backend, derive, egraph, npz};
use clap::{Args, Parser, Subcommand};
use std::io::Read;

#[derive(Parser, Debug)]
#[command(
    name = "atl-egg",
    version,
    about = "Differentiate and optimize A Tensor Language (ATL) programs by equality saturation",
    after_help = "Run `atl-egg help COMMAND` for a command's flags and what it prints.\n\
                  The language and the commands are documented in docs/ of the repository."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// GiB of memory the command may hold at once (fractions allowed); an
    /// allocation past it ends the command with an error (exit 1).
    #[arg(long, global = true, value_name = "GIB", default_value_t = atl_egg::limits::DEFAULT_MEMORY_LIMIT_GIB)]
    pub memory_limit: f64,
}

impl Cli {
    /// The memory cap in bytes, from `--memory-limit`.
    pub fn memory_limit_bytes(&self) -> Result<usize> {
        let gib = self.memory_limit;
        if !(gib.is_finite() && gib > 0.0 && gib < 1e6) {
            return Err(Error::usage(
                "--memory-limit must be a positive number of GiB",
            ));
        }
        Ok((gib * (1u64 << 30) as f64) as usize)
    }
}

#[derive(Args, Debug, Clone)]
pub struct FileArg {
    /// The program file, or `-` for standard input.
    pub file: String,
    /// The function of the file to use (default: the last one).
    #[arg(long = "fn", value_name = "NAME")]
    pub function: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct SizesArg {
    /// Sizes, as `n=4,m=3`; a size not given is taken from an input whose
    /// dimension is exactly that size name.
    #[arg(long)]
    pub sizes: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct OutputArg {
    /// Write the output to FILE instead of standard output (for `eval`, a
    /// name ending in `.npy` or `.npz` writes NumPy arrays).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<String>,
}

const INPUTS_HELP: &str = "The inputs: a JSON file holding an object from parameter names to values \
(`-` for standard input), an `.npz` archive, or a folder of `.npy` files (one per input, named after it)";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Type-check a program and print its signature.
    Check {
        #[command(flatten)]
        file: FileArg,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Evaluate a program on inputs and print the result as JSON.
    ///
    /// NaN is written `null` and the infinities `1e999` and `-1e999` (strict
    /// JSON), which `--inputs` reads back. With `-o result.npz` the
    /// result is written as NumPy arrays: one array named `result`, or for a
    /// pair one array per component (`result.0`, `result.1`, `result.1.0`, ...).
    Eval {
        #[command(flatten)]
        file: FileArg,
        #[arg(long, value_name = "FILE", help = INPUTS_HELP)]
        inputs: String,
        #[command(flatten)]
        sizes: SizesArg,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Print the paper's work cost of a program (last line: the integer).
    Cost {
        #[command(flatten)]
        file: FileArg,
        #[command(flatten)]
        sizes: SizesArg,
        /// Inputs (needed for relation values and to infer sizes); JSON, `-`,
        /// `.npz` or a folder of `.npy` files.
        #[arg(long, value_name = "FILE")]
        inputs: Option<String>,
        /// Print the input/output cost (cost + size of inputs and output).
        #[arg(long)]
        io: bool,
        /// CPU seconds the count may take; past them it fails with an error.
        #[arg(long, default_value_t = egraph::runner::DEFAULT_TIME_LIMIT as f64)]
        time_limit: f64,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Optimize a program by equality saturation; prints core forms.
    ///
    /// The result is equal in value (up to floating-point reassociation) and
    /// costs no more than the input at every size checked.
    Optimize {
        #[command(flatten)]
        file: FileArg,
        #[command(flatten)]
        opt: OptArgs,
    },
    /// The gradient of a function returning R (reverse mode), optimized.
    ///
    /// The program printed has the original parameters and no others. It
    /// returns the gradient with respect to each `--wrt` input: one input's
    /// gradient as itself, several as right-nested pairs in `--wrt` order
    /// (`(pair dx (pair dy dz))`); `--format json` lists which is which.
    Grad(DeriveArgs),
    /// Jacobian-vector product (forward mode).
    ///
    /// The program printed has the original parameters, then one tangent
    /// parameter per `--wrt` input, of that input's type, named `d` and the
    /// input's name (`dx` for `x`, made unique if taken), in `--wrt` order.
    /// It returns the tangent of the output.
    Jvp(DeriveArgs),
    /// Vector-Jacobian product (reverse mode).
    ///
    /// The program printed has the original parameters, then one cotangent
    /// parameter `ct` of the output's type (made unique if taken). It returns
    /// what `grad` returns: the cotangent pulled back to each `--wrt` input,
    /// several as right-nested pairs in `--wrt` order.
    Vjp(DeriveArgs),
    /// Hessian-vector product of a function returning R (forward over reverse).
    ///
    /// The program printed has the original parameters, then one direction
    /// parameter per `--wrt` input, of that input's type, named `d` and the
    /// input's name, in `--wrt` order. It returns the derivative of the
    /// gradient along the directions, shaped like `grad`'s result.
    Hvp(DeriveArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// For example: `atl-egg completions bash > ~/.local/share/bash-completion/completions/atl-egg`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Compile a program to native code: C source (`-o F.c`, or standard
    /// output without `-o`), a shared library (`.so`) or its manifest (`.json`).
    Compile {
        #[command(flatten)]
        file: FileArg,
        /// Output file; its extension says what to write.
        #[arg(short = 'o', long = "output")]
        output: Option<String>,
    },
    /// Compile (cached), run on the inputs and print the result as `eval` does.
    Run {
        #[command(flatten)]
        file: FileArg,
        #[arg(long, help = INPUTS_HELP)]
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
        #[command(flatten)]
        output: OutputArg,
    },
}

#[derive(Args, Debug, Clone)]
pub struct DeriveArgs {
    #[command(flatten)]
    pub file: FileArg,
    /// Inputs to differentiate, comma-separated (default: every real input,
    /// in parameter order).
    #[arg(long)]
    pub wrt: Option<String>,
    #[command(flatten)]
    pub opt: OptArgs,
}

impl DeriveArgs {
    fn wrt(&self) -> Result<Vec<&str>> {
        let Some(w) = &self.wrt else {
            return Ok(vec![]);
        };
        let names: Vec<&str> = w.split(',').map(str::trim).collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(Error::usage(format!(
                "--wrt {w}: expected names separated by commas"
            )));
        }
        Ok(names)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StatsFormat {
    /// A short summary: per phase iterations, e-nodes, stop reason, time;
    /// the cost before and after.
    Summary,
    /// The full record as JSON.
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct OptArgs {
    /// Sizes to compare costs at (after the large default sample), and to
    /// report the cost at with `--stats`.
    #[command(flatten)]
    pub sizes: SizesArg,
    /// Print statistics on stderr: `--stats` a short summary, `--stats=json`
    /// the full record as JSON.
    #[arg(
        long,
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "summary",
        value_name = "FORMAT"
    )]
    pub stats: Option<StatsFormat>,
    /// Output format.
    #[arg(long, value_enum, default_value = "sexp")]
    pub format: backend::Format,
    /// Most e-nodes per phase.
    #[arg(long, default_value_t = 10_000)]
    pub node_limit: usize,
    /// Most iterations per phase.
    #[arg(long, default_value_t = 30)]
    pub iter_limit: usize,
    /// CPU seconds the whole command may take (differentiation included);
    /// past them it fails with an error. The result never depends on it: the
    /// node and iteration limits decide where each phase stops.
    #[arg(long, default_value_t = egraph::runner::DEFAULT_TIME_LIMIT as f64)]
    pub time_limit: f64,
    #[command(flatten)]
    pub output: OutputArg,
}

impl OptArgs {
    pub fn options(&self) -> Result<egraph::Options> {
        Ok(egraph::Options {
            node_limit: self.node_limit,
            iter_limit: self.iter_limit,
            time_limit: seconds(self.time_limit)?,
            sizes: self
                .sizes
                .sizes
                .as_deref()
                .map(str::parse::<sizes::Sizes>)
                .transpose()?,
            deadline: None,
        })
    }
}

/// The value of `--time-limit`.
fn seconds(time_limit: f64) -> Result<std::time::Duration> {
    if !(time_limit.is_finite() && time_limit > 0.0 && time_limit < 1e6) {
        return Err(Error::usage(
            "--time-limit must be a positive number of seconds",
        ));
    }
    Ok(std::time::Duration::from_secs_f64(time_limit))
}

/// What a run read: the program's name and text, for error reports.
#[derive(Default)]
pub struct Session {
    /// The program file's name (`<stdin>` for `-`) and text.
    pub source: Option<(String, String)>,
    /// Standard input was already read (for the program or the inputs).
    stdin_used: bool,
    /// The program text, read from standard input before the run (to size
    /// the run's stack by its depth).
    program_stdin: Option<Vec<u8>>,
}

impl Session {
    /// A session for `cmd`, and how deep its program nests
    /// ([`atl_egg::nesting_depth`]; 0 for a command without a program or
    /// a file that cannot be read, which the run then reports).
    pub fn for_command(cmd: &Command) -> (Session, usize) {
        let mut session = Session::default();
        let depth = match cmd.program_path() {
            Some("-") => match read_stdin(&mut session, "program") {
                Ok(text) => {
                    let depth = atl_egg::nesting_depth(&text);
                    session.program_stdin = Some(text);
                    depth
                }
                Err(_) => 0,
            },
            Some(path) => std::fs::read(path).map_or(0, |t| atl_egg::nesting_depth(&t)),
            None => 0,
        };
        (session, depth)
    }
}

impl Command {
    /// The program file the command reads, if any.
    fn program_path(&self) -> Option<&str> {
        match self {
            Command::Check { file, .. }
            | Command::Eval { file, .. }
            | Command::Cost { file, .. }
            | Command::Optimize { file, .. }
            | Command::Compile { file, .. }
            | Command::Run { file, .. } => Some(&file.file),
            Command::Grad(a) | Command::Jvp(a) | Command::Vjp(a) | Command::Hvp(a) => {
                Some(&a.file.file)
            }
            Command::Completions { .. } => None,
        }
    }
}

/// An optimized program in the chosen format; the statistics on stderr.
fn show(
    prog: &Program,
    stats: &atl_egg::optimizer::Stats,
    opt: &OptArgs,
    returns: Option<Vec<serde_json::Value>>,
) -> String {
    match opt.stats {
        Some(StatsFormat::Summary) => {
            eprint!("{}", cli_stats::summary(stats, opt.sizes.sizes.as_deref()))
        }
        Some(StatsFormat::Json) => eprintln!("{}", cli_stats::to_json_text(stats)),
        None => {}
    }
    for w in cli_stats::limit_warnings(stats) {
        eprintln!("atl-egg: warning: {w}");
    }
    let extras = backend::Extras {
        returns,
        stats: Some(cli_stats::to_json(stats)),
    };
    backend::render(prog, opt.format, &extras)
}

fn read_stdin(session: &mut Session, what: &str) -> Result<Vec<u8>> {
    if session.stdin_used {
        return Err(Error::usage(format!(
            "standard input is already read for the program; give the {what} as a file"
        )));
    }
    session.stdin_used = true;
    let mut buf = vec![];
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| Error::input(format!("cannot read standard input: {e}")))?;
    Ok(buf)
}

pub fn load_program(file: &FileArg, session: &mut Session) -> Result<Program> {
    let path = file.file.as_str();
    let text = if path == "-" {
        match session.program_stdin.take() {
            Some(text) => text,
            None => read_stdin(session, "program")?,
        }
    } else {
        std::fs::read(path).map_err(|e| Error::input(format!("cannot read {path}: {e}")))?
    };
    let name = if path == "-" { "<stdin>" } else { path };
    session.source = Some((
        name.to_string(),
        String::from_utf8_lossy(&text).into_owned(),
    ));
    derive::forms::parse_program_fn(&text, file.function.as_deref())
}

/// The inputs: a JSON object from a JSON file or standard input; or, from
/// an `.npz` archive or a folder of `.npy` files, the arrays that give
/// whole parameters and a JSON object assembling the others.
fn read_inputs(
    path: &str,
    prog: &Program,
    sizes: &value::Sizes,
    session: &mut Session,
) -> Result<(serde_json::Value, Arrays)> {
    let p = std::path::Path::new(path);
    if path != "-" && (path.ends_with(".npz") || p.is_dir()) {
        return npz::read_inputs(p, prog, sizes);
    }
    if path.ends_with(".npy") {
        return Err(Error::input(format!(
            "{path}: a single .npy file holds one unnamed array"
        ))
        .with_hint(
            "put one .npy file per input, named after it, in a folder, or use an .npz archive",
        ));
    }
    let (text, name) = if path == "-" {
        (read_stdin(session, "inputs")?, "standard input")
    } else {
        (
            std::fs::read(path).map_err(|e| Error::input(format!("cannot read {path}: {e}")))?,
            path,
        )
    };
    let utf8 = std::str::from_utf8(&text)
        .map_err(|_| Error::input(format!("{name}: the JSON inputs are not UTF-8")))?;
    let json = atl_egg::semantics::json::parse_json(utf8).map_err(|e| {
        // point into the JSON text: the report then shows its line
        let mut err = Error::input(format!("{name}: malformed JSON: {e}"));
        if e.line() > 0 {
            let label = if path == "-" { "<stdin>" } else { path };
            session.source = Some((
                label.to_string(),
                String::from_utf8_lossy(&text).into_owned(),
            ));
            err.pos = Some(atl_egg::Pos {
                line: e.line() as u32,
                col: e.column().max(1) as u32,
            });
            let full = e.to_string();
            let at = format!(" at line {} column {}", e.line(), e.column());
            err.msg = format!(
                "malformed JSON inputs: {}",
                full.strip_suffix(&at).unwrap_or(&full)
            );
        }
        err
    })?;
    Ok((json, Arrays::new()))
}

/// Sizes from `--sizes` and the inputs, then the inputs themselves.
fn inputs_for(
    prog: &Program,
    sizes: &SizesArg,
    inputs: Option<&str>,
    require_reals: bool,
    session: &mut Session,
) -> Result<value::Inputs> {
    let given = match &sizes.sizes {
        Some(s) => s.parse::<sizes::Sizes>()?,
        None => value::Sizes::default(),
    };
    let (json, arrays) = match inputs {
        Some(p) => {
            let (json, arrays) = read_inputs(p, prog, &given, session)?;
            (Some(json), arrays)
        }
        None => (None, Arrays::new()),
    };
    let resolved = sizes::resolve_sizes_from(prog, &given, json.as_ref(), &arrays)?;
    let empty = serde_json::Value::Object(Default::default());
    json::inputs_from(
        prog,
        json.as_ref().unwrap_or(&empty),
        &arrays,
        &resolved,
        require_reals,
    )
}

/// Write `text` to `-o FILE` (returning nothing to print) or return it.
fn emit(text: String, output: &OutputArg) -> Result<String> {
    match &output.output {
        Some(path) if path != "-" => {
            std::fs::write(path, text)
                .map_err(|e| Error::input(format!("cannot write {path}: {e}")))?;
            Ok(String::new())
        }
        _ => Ok(text),
    }
}

/// A result value as JSON (or NumPy files, for `-o X.npz`/`.npy`).
fn emit_value(
    v: &value::Value,
    prog: &Program,
    inputs: &value::Inputs,
    output: &OutputArg,
) -> Result<String> {
    let (v, ret) = &atl_egg::semantics::stored::result_out(prog, v, inputs)?;
    emit_given_out(v, ret, inputs, output)
}

/// A result value already in its given-out form (a stored result as its
/// values), of type `ret`, as JSON or NumPy files.
fn emit_given_out(
    v: &value::Value,
    ret: &atl_egg::front::ast::Type,
    inputs: &value::Inputs,
    output: &OutputArg,
) -> Result<String> {
    if let Some(path) = &output.output {
        if path.ends_with(".npz") || path.ends_with(".npy") {
            npz::write_value(std::path::Path::new(path), v, ret, &inputs.sizes)?;
            return Ok(String::new());
        }
    }
    emit(
        json::value_to_json_string(v, ret, &inputs.sizes)? + "\n",
        output,
    )
}

/// Run a command; returns what to print on stdout.
pub fn run(cmd: Command, session: &mut Session) -> Result<String> {
    let which = match &cmd {
        Command::Grad(_) => "grad",
        Command::Jvp(_) => "jvp",
        Command::Vjp(_) => "vjp",
        Command::Hvp(_) => "hvp",
        _ => "",
    };
    match cmd {
        Command::Check { file, output } => {
            let prog = load_program(&file, session)?;
            emit(backend::sexp::signature(&prog) + "\n", &output)
        }
        Command::Eval {
            file,
            inputs,
            sizes,
            output,
        } => {
            let prog = load_program(&file, session)?;
            let inputs = inputs_for(&prog, &sizes, Some(&inputs), true, session)?;
            let v = eval::evaluate(&prog, &inputs)?;
            emit_value(&v, &prog, &inputs, &output)
        }
        Command::Cost {
            file,
            sizes,
            inputs,
            io,
            time_limit,
            output,
        } => {
            let limit = seconds(time_limit)?;
            let _deadline =
                atl_egg::limits::deadline_scope(atl_egg::limits::CpuTime::now() + limit, limit);
            let prog = load_program(&file, session)?;
            let inputs = inputs_for(&prog, &sizes, inputs.as_deref(), false, session)?;
            let c = if io {
                cost::io_cost(&prog, &inputs.sizes, &inputs.relations)?
            } else {
                cost::cost(&prog, &inputs.sizes, &inputs.relations)?
            };
            emit(format!("{c}\n"), &output)
        }
        Command::Optimize { file, opt } => {
            let prog = load_program(&file, session)?;
            let out = atl_egg::optimizer::optimize(&prog, &opt.options()?)?;
            let text = show(&out.program, &out.stats, &opt, None);
            emit(text, &opt.output)
        }
        Command::Grad(a) | Command::Jvp(a) | Command::Vjp(a) | Command::Hvp(a) => {
            let prog = load_program(&a.file, session)?;
            let wrt = atl_egg::resolve_wrt(&prog, &a.wrt()?)?;
            let opts = a.opt.options()?;
            let out = match which {
                "grad" => derive::grad(&prog, &wrt, &opts)?,
                "jvp" => derive::jvp(&prog, &wrt, &opts)?,
                "vjp" => derive::vjp(&prog, &wrt, &opts)?,
                _ => derive::hvp(&prog, &wrt, &opts)?,
            };
            let returns = (which != "jvp").then(|| backend::json::labelled_returns(&prog, &wrt));
            let text = show(&out.program, &out.stats, &a.opt, returns);
            emit(text, &a.opt.output)
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut buf = vec![];
            clap_complete::generate(shell, &mut Cli::command(), "atl-egg", &mut buf);
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
        Command::Compile { file, output } => {
            let prog = load_program(&file, session)?;
            compile_cmd(&prog, output.as_deref())
        }
        Command::Run {
            file,
            inputs,
            sizes,
            repeat,
            count_ops,
            output,
        } => {
            let prog = load_program(&file, session)?;
            let inputs = inputs_for(&prog, &sizes, Some(&inputs), true, session)?;
            run_cmd(&prog, &inputs, repeat, count_ops, &output)
        }
    }
}

/// `compile FILE [-o OUT]`.
fn compile_cmd(prog: &Program, output: Option<&str>) -> Result<String> {
    let src = backend::generate(prog)?;
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
            std::fs::copy(&lib.path, out)
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
    prog: &Program,
    inputs: &value::Inputs,
    repeat: usize,
    count_ops: bool,
    output: &OutputArg,
) -> Result<String> {
    if repeat == 0 {
        return Err(Error::usage("--repeat must be at least 1"));
    }
    let compiled = backend::compile_with(prog, count_ops)?;
    // a stored result stays its values: never expanded to its dimensions
    let (v, ret, ops, mut times) = compiled.call_given_out(inputs, repeat)?;
    let text = emit_given_out(&v, &ret, inputs, output)?;
    if repeat > 1 {
        times.sort_by(f64::total_cmp);
        eprintln!(
            "time: best {:.3e} s, median {:.3e} s ({repeat} runs)",
            times[0],
            times[times.len() / 2]
        );
    }
    // last on stderr, as docs/cli.md says
    if let Some([a, m, c, iterations, tests]) = ops {
        eprintln!("loops: {iterations} iterations, {tests} tests");
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
