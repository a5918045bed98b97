//! The report: built once, when detection fires, from a snapshot of the streams; rendered as text
//! on stderr, written as JSON and, with `CUDABLAME_TRACE`, as a Chrome trace. Everything slow
//! (kernel names, symbolization) happens here.

pub(crate) mod sink;

pub(crate) use cudablame_report::{hints, model, pattern, text, trace};

use crate::blame::{self, Confidence};
use crate::config;
use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use crate::real;
use crate::record::{self, Call, OpKind, OpRecord, StreamId, StreamView};
use crate::stack::python::PythonStack;
use crate::stack::{self, NativeStack};
use model::*;
use std::collections::HashMap;

/// Recent ops listed per stream.
const RECENT_PER_STREAM: usize = 8;

/// Builds and emits the report for an error returned by `ep`. `failed_launch` is set when the
/// call was a launch that failed by itself (non-sticky): it is then the `exact` culprit.
/// Returns the report's note for the decorated error strings (`text::error_string_note`), not
/// the report: a `Report` is about 3.5 KiB, and its return slot in the caller's frame came on
/// top of the stack the reporting thread needs before the report moves to a thread of its own
/// (`robust.rs`, `the_sticky_error_path_keeps_its_stack_headroom`).
pub(crate) fn emit(
    ep: EntryPoint,
    call: &Call,
    rc: CUresult,
    failed_launch: Option<OpRecord>,
    wait: std::time::Duration,
) -> Option<String> {
    crate::config::test_panic(crate::config::PanicPoint::Report);
    let started = std::time::Instant::now();
    let live = Live::capture(ep, call);
    let call = *call;
    let finish =
        move || text::error_string_note(&finish(ep, &call, rc, failed_launch, live, started));
    if crate::stack::unwind::has_room(REPORT_STACK_NEED) {
        return Some(finish());
    }
    let create = real::pthread_create();
    crate::safety::own_thread::on_new_thread(create, REPORT_STACK, wait, finish)
}

/// Stack (bytes) the report's symbolizing and rendering may need at most: a thread with less
/// left builds it on a thread of its own with [`REPORT_STACK`] bytes. Measured on the simulated
/// driver: a report needs more than 24 KiB and less than 32 KiB (a thread created with 24 KiB
/// crashed with SIGSEGV, before this); symbolizing a large library can need more.
const REPORT_STACK_NEED: u64 = 256 << 10;
/// The stack of the thread a report is built on when the reporting thread's is too small.
const REPORT_STACK: usize = 8 << 20;

/// What only the reporting thread can read, taken on it before the rest of the report (which may
/// be built on another thread, see [`emit`]): the time, its thread, its native and Python stacks
/// and the context its call concerns.
struct Live {
    now: u64,
    thread: u32,
    stack: ReportingStack,
    python: PythonFrames,
    context: Option<usize>,
}

/// The reporting call's native stack: unwound on its thread, or, where that thread has too little
/// stack left for an unwind (`stack::LIVE_UNWIND_ROOM`), a copy of its top (the bytes, as a
/// launch's, `stack::copy`) unwound on the thread that builds the report.
enum ReportingStack {
    Unwound(Box<NativeStack>),
    Copied(Box<crate::stack::copy::StackCopy>),
}

impl ReportingStack {
    #[inline(never)]
    fn capture(now: u64) -> ReportingStack {
        if crate::stack::unwind::has_room(crate::stack::LIVE_UNWIND_ROOM) {
            return ReportingStack::Unwound(Box::new(NativeStack::capture(
                config::MAX_STACK_DEPTH,
                now,
                None,
            )));
        }
        let mut copy = Box::new(crate::stack::copy::StackCopy::new(
            config::get().stack_bytes,
        ));
        copy.fill(0, &crate::stack::EntryRegs::here());
        ReportingStack::Copied(copy)
    }

    fn unwound(self) -> NativeStack {
        match self {
            ReportingStack::Unwound(s) => *s,
            ReportingStack::Copied(c) => c.unwind(config::MAX_STACK_DEPTH),
        }
    }
}

impl Live {
    fn capture(ep: EntryPoint, call: &Call) -> Live {
        let now = record::now_ns();
        Live {
            now,
            thread: crate::threads::thread_id(),
            stack: ReportingStack::capture(now),
            python: PythonStack::capture_configured().resolve(),
            // The context the reporting call concerns (its stream's, the one it names, else the
            // current one): a sticky error belongs to one context.
            context: Some(call.context(ep)).filter(|&c| c != 0),
        }
    }
}

/// The report from what the reporting thread captured (`live`), written where configured.
fn finish(
    ep: EntryPoint,
    call: &Call,
    rc: CUresult,
    failed_launch: Option<OpRecord>,
    live: Live,
    started: std::time::Instant,
) -> Report {
    let cfg = config::get();
    let mut report = build(ep, call, rc, failed_launch, live);
    report.build_ns = started.elapsed().as_nanos() as u64;
    if let Some(pattern) = &cfg.report {
        report.path = sink::write_json(pattern, &report, report.process.rank);
    }
    if let Some(pattern) = &cfg.trace {
        report.trace_path = sink::write_trace(
            pattern,
            &trace::build(&report),
            &report,
            report.process.rank,
        );
    }
    if cfg.text {
        crate::safety::write_stderr(text::render(&report).as_bytes());
    }
    report
}

fn build(
    ep: EntryPoint,
    call: &Call,
    rc: CUresult,
    failed_launch: Option<OpRecord>,
    live: Live,
) -> Report {
    let driver = real::driver();
    let Live {
        now,
        thread,
        stack: reporting_stack,
        python: reporting_python,
        context,
    } = live;
    let reporting_stack = reporting_stack.unwound();
    let views = record::snapshot::snapshot();
    let mut names = Names {
        driver,
        cache: HashMap::new(),
        depth: 0,
    };

    let reporting_stream = call
        .stream()
        .map(|raw| StreamId::resolve(raw, ep.per_thread_default(), thread));
    let (code_name, description) = match driver {
        Some(d) => d.error_text(rc),
        None => {
            let (n, d) = error_name(rc);
            (n.to_string(), d.to_string())
        }
    };

    // A device-side assert line is evidence only for this error when it is one (710) and was
    // printed after the first unfinished op of this context was launched.
    let since = blame::unfinished_since(&views, context);
    let device_assert = device_assert(rc, since);
    let (culprit, suspects, culprit_at) = match failed_launch {
        Some(op) => {
            let reason = format!(
                "the launch itself returned {code_name} ({rc}): the driver refused it synchronously and \
                 nothing was enqueued"
            );
            let op = names.op(&op, now, "culprit", true);
            (
                Culprit {
                    confidence: Confidence::Exact,
                    reason,
                    op: Some(op),
                    hint: None,
                    device_assert: None,
                    candidates: Vec::new(),
                    not_exact: None,
                    window: Vec::new(),
                    one_of: 0,
                    beyond: None,
                },
                Vec::new(),
                None,
            )
        }
        None => {
            let assert_kernel = device_assert
                .as_ref()
                .filter(|a| !a.ambiguous)
                .and_then(|a| a.assert.kernel.clone());
            let mut v = {
                let mut kernels = |o: &OpRecord| names.kernels_of(o);
                blame::judge_with(
                    &views,
                    context,
                    &mut blame::Clues {
                        kernels: &mut kernels,
                        assert_kernel: assert_kernel.as_deref(),
                        kernels_only: rc == crate::cuda::CUDA_ERROR_ASSERT,
                        markers_work: config::markers_enabled(),
                    },
                )
            };
            // Destroyed streams dropped unfinished, of every context of the device the verdict
            // judges (not only of contexts with a stream still kept: such a context may hold
            // none, and its fault still stops the device).
            let device = blame::scope_device(&views, context);
            let dropped = record::streams::dropped_unfinished_on(device);
            let destroyed = record::streams::destroyed_unfinished(device);
            blame::cap_for_unseen_work(
                &mut v,
                &views,
                context,
                dropped,
                destroyed,
                record::ever_paused(),
            );
            blame::cap_for_code(&mut v, rc, mps_client());
            let op = v
                .culprit
                .map(|at| names.op(&views[at.0].ops[at.1], now, "culprit", true));
            let suspects: Vec<Op> = v
                .suspects
                .iter()
                .map(|&at| names.op(&views[at.0].ops[at.1], now, "not completed", true))
                .collect();
            // The window's entries, each op with its kernel and launching line (symbolized for
            // the first WINDOW_SITES ops only: a window can be long).
            let mut sites: HashMap<(usize, u64), (Option<String>, Option<String>)> = HashMap::new();
            let in_window = v.window.iter().chain(v.candidates.iter());
            for r in in_window {
                let Some(at) = r.at else { continue };
                if sites.contains_key(&(r.stream, r.seq)) {
                    continue;
                }
                let o = &views[at.0].ops[at.1];
                // The culprit's or a suspect's entry, by position: never by sequence number
                // and stream name, which two contexts' default streams share ("legacy",
                // "per-thread(T)"; a break-it review: a window of two contexts' op #1 listed
                // the healthy kernel twice and left the faulting one out).
                let known = (v.culprit.iter().zip(&op))
                    .chain(v.suspects.iter().zip(&suspects))
                    .find(|&(&x_at, _)| x_at == at)
                    .map(|(_, x)| (x.kernel.clone(), program_frame(x)));
                let site = match known {
                    Some(k) => k,
                    None if sites.len() < WINDOW_SITES => {
                        let x = names.op(o, now, "not completed", true);
                        (x.kernel.clone(), program_frame(&x))
                    }
                    None => (names.op(o, now, "not completed", false).kernel, None),
                };
                sites.insert((r.stream, r.seq), site);
            }
            let entry = |r: &blame::Ranked| {
                let (kernel, launched_at) = sites
                    .get(&(r.stream, r.seq))
                    .filter(|_| r.at.is_some())
                    .cloned()
                    .unwrap_or((None, None));
                Candidate {
                    seq: r.seq,
                    stream: views[r.stream].id.describe(),
                    kernel,
                    launched_at,
                    evidence: r.evidence.clone(),
                    unknown_ops: r.unknown,
                }
            };
            let candidates = v.candidates.iter().map(entry).collect();
            let window = v
                .window
                .iter()
                .map(|r| {
                    let mut c = entry(r);
                    // In stream order the evidence of a known op is its rank's.
                    if let Some(ranked) =
                        v.candidates.iter().find(|x| x.at == r.at && r.at.is_some())
                    {
                        c.evidence = ranked.evidence.clone();
                    }
                    c
                })
                .collect();
            let device_assert = device_assert.clone().map(|a| {
                let mut d = a.assert;
                d.matches_culprit = v.assert_matched;
                d
            });
            (
                Culprit {
                    confidence: v.confidence,
                    reason: v.reason,
                    op,
                    hint: None,
                    device_assert,
                    candidates,
                    not_exact: v.not_exact,
                    window,
                    one_of: v.one_of,
                    beyond: v.beyond,
                },
                suspects,
                v.culprit,
            )
        }
    };

    let mut culprit = culprit;
    culprit.hint = culprit
        .op
        .as_ref()
        .and_then(|o| o.kernel.as_deref())
        .and_then(|k| hints::hint(k, &code_name))
        .map(String::from);

    let streams = views
        .iter()
        .enumerate()
        .filter(|(_, v)| {
            !views.iter().any(|w| Some(w.context) == context) || Some(v.context) == context
        })
        .map(|(i, v)| stream_summary(i, v, culprit_at, now, &mut names))
        .collect();

    Report {
        schema: SCHEMA.to_string(),
        process: process_info(),
        error: ErrorInfo {
            code: rc,
            name: code_name,
            description,
            sticky: is_sticky(rc),
        },
        reporting_call: ReportingCall {
            entry_point: ep.name().to_string(),
            thread,
            stream: reporting_stream.map(StreamId::describe),
            time_ns: now,
            stack: stack::symbolize(reporting_stack.ips(), config::MAX_STACK_DEPTH),
            python: reporting_python,
            python_note: stack::python::note(),
        },
        culprit,
        suspects,
        streams,
        build_ns: 0,
        path: None,
        trace_path: None,
    }
}

fn stream_summary(
    index: usize,
    v: &StreamView,
    culprit: Option<blame::OpAt>,
    now: u64,
    names: &mut Names,
) -> StreamSummary {
    let completed = v.completed();
    let start = v.ops.len().saturating_sub(RECENT_PER_STREAM);
    let recent = v.ops[start..]
        .iter()
        .enumerate()
        .map(|(j, o)| {
            let state = if culprit == Some((index, start + j)) {
                "culprit"
            } else if o.seq <= completed || o.synchronous {
                "completed"
            } else {
                "not completed"
            };
            names.op(o, now, state, false)
        })
        .collect();
    StreamSummary {
        stream: v.id.describe(),
        context: format!("{:#x}", v.context),
        device: v.device,
        issued: v.issued,
        completed,
        marker: v.marker,
        recent,
    }
}

/// Kernel names for one report, each asked of the driver once.
struct Names {
    driver: Option<&'static real::Driver>,
    cache: HashMap<usize, Option<String>>,
    /// Graphs being listed, one inside the other ([`Names::graph`]).
    depth: usize,
}

impl Names {
    fn kernel(&mut self, handle: usize) -> Option<String> {
        let driver = self.driver;
        self.cache
            .entry(handle)
            .or_insert_with(|| record::names::name(driver, handle))
            .clone()
    }

    /// The kernels `o` runs (demangled): its kernel, or a graph launch's captured kernels (with
    /// those of graph launches captured into it); incomplete when a name is unknown, the graph's
    /// capture was not seen, it was built by hand, changed after capture (`changed` too), or its
    /// list may have been cut (`record::graphs::OPS_PER_GRAPH` ops kept per graph).
    fn kernels_of(&mut self, o: &OpRecord) -> blame::KernelList {
        match o.launch.kind {
            OpKind::Kernel => {
                let name = self.kernel(o.launch.handle).map(|k| stack::demangle(&k));
                blame::KernelList {
                    complete: name.is_some(),
                    names: name.into_iter().collect(),
                    changed: false,
                }
            }
            OpKind::Graph => self.graph_kernels(o.graph, 0),
            OpKind::Memcpy | OpKind::Memset => blame::KernelList::none(),
        }
    }

    /// The kernels of the graph a launch ran ([`record::graphs::AtLaunch`]), `depth` graph
    /// launches deep.
    fn graph_kernels(&mut self, at: record::graphs::AtLaunch, depth: usize) -> blame::KernelList {
        let seen = (depth < record::graphs::NESTING_FOLLOWED)
            .then(|| record::graphs::seen(at))
            .flatten();
        let Some(g) = seen else {
            return blame::KernelList::default();
        };
        let mut list = blame::KernelList {
            names: Vec::new(),
            complete: g.complete(),
            changed: g.changed,
        };
        for c in &g.info.ops {
            match c.launch.kind {
                OpKind::Kernel => match self.kernel(c.launch.handle) {
                    Some(k) => list.names.push(stack::demangle(&k)),
                    None => list.complete = false,
                },
                OpKind::Graph => {
                    let inner = self.graph_kernels(c.graph, depth + 1);
                    list.names.extend(inner.names);
                    list.complete &= inner.complete;
                    list.changed |= inner.changed;
                }
                OpKind::Memcpy | OpKind::Memset => {}
            }
        }
        list
    }

    fn op(&mut self, o: &OpRecord, now: u64, state: &str, with_stack: bool) -> Op {
        let symbol = match o.launch.kind {
            OpKind::Kernel => self.kernel(o.launch.handle),
            _ => None,
        };
        let stack = if with_stack {
            stack::symbolize(stack::kept(o.stack).ips(), config::get().stack_depth)
        } else {
            Vec::new()
        };
        let python = if with_stack {
            o.python.resolve()
        } else {
            Default::default()
        };
        let graph = match o.launch.kind {
            OpKind::Graph if with_stack && self.depth < record::graphs::NESTING_FOLLOWED => {
                record::graphs::seen(o.graph).map(|g| self.graph(&g, now))
            }
            _ => None,
        };
        // A graph launch is named by what it runs: "graph: fill, oob_kernel, scale" (the
        // kernels of a graph launch captured into it included); no kernel known (a graph built
        // by hand): no name.
        let kernel = match &graph {
            Some(g) => {
                let mut names: Vec<&str> = Vec::new();
                for n in g.ops.iter().filter_map(|op| op.kernel.as_deref()) {
                    let n = n.strip_prefix("graph: ").unwrap_or(n);
                    if !n.is_empty() && !names.contains(&n) {
                        names.push(n);
                    }
                }
                (!names.is_empty()).then(|| format!("graph: {}", names.join(", ")))
            }
            None => symbol.as_deref().map(stack::demangle),
        };
        Op {
            seq: o.seq,
            kind: o.launch.kind,
            kernel,
            kernel_symbol: symbol,
            grid: o.launch.grid,
            block: o.launch.block,
            shared_mem_bytes: o.launch.shared_mem_bytes,
            bytes: o.launch.bytes,
            stream: o.stream.describe(),
            context: format!("{:#x}", o.context),
            device: o.device,
            thread: o.thread,
            entry_point: o.entry_point.name().to_string(),
            time_ns: o.time_ns,
            age_ns: now.saturating_sub(o.time_ns),
            state: state.to_string(),
            synchronous: o.synchronous,
            stack_from_site: with_stack
                && matches!(o.stack, crate::stack::StackRef::Site { first: false, .. }),
            stack,
            python,
            graph,
            thread_start: if with_stack {
                thread_start(o.thread)
            } else {
                None
            },
        }
    }

    /// The captured ops of a graph, each with its capture-time stacks (graph launches captured
    /// into it with theirs, up to `record::graphs::NESTING_FOLLOWED` deep), and whether it was
    /// changed after capture or built by hand.
    fn graph(&mut self, g: &record::graphs::Seen, now: u64) -> GraphOps {
        self.depth += 1;
        let ops = g
            .info
            .ops
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mut op = self.op(o, now, "captured", true);
                op.seq = i as u64 + 1;
                op
            })
            .collect();
        self.depth -= 1;
        GraphOps {
            ops,
            captured_at: stack::symbolize(g.info.captured_at.ips(), config::get().stack_depth),
            captured_by_thread: g.info.thread,
            changed_after_capture: g.changed && !g.info.by_hand,
            built_by_hand: g.info.by_hand,
        }
    }
}

/// What thread `tid` was started to run (see `threads`), in words.
fn thread_start(tid: u32) -> Option<String> {
    let s = crate::threads::start_of(tid)?;
    // Symbolize a function's entry: symbolize looks up one byte before a return address, so pass
    // one byte into the function; the outermost frame there is the function itself (the first
    // ones are what it inlined).
    // With line tables, the outermost frame in the program's own sources (not a system header)
    // is where the callable is written.
    let at = |addr: usize| {
        let frames = stack::symbolize([addr + 2], 8);
        let system = |f: &Frame| {
            f.file
                .as_deref()
                .is_none_or(|p| p.starts_with("/usr/include/") || p.contains("/c++/"))
        };
        let f = frames
            .iter()
            .rev()
            .find(|f| !system(f))
            .or(frames.last())?
            .clone();
        let module = f
            .module
            .as_deref()
            .map(|m| m.rsplit('/').next().unwrap_or(m));
        Some(match (f.function, f.file, f.line, module) {
            (Some(n), Some(file), Some(line), _) => format!("{n} at {file}:{line}"),
            (Some(n), _, _, Some(m)) => format!("{n} in {m}"),
            (None, _, _, Some(m)) => format!("in {m}"),
            (n, ..) => n.unwrap_or_else(|| "??".into()),
        })
    };
    // A function pointer run by a std::thread: the function itself (issue 19 item 3).
    if let Some(f) = crate::threads::std_thread_function(&s).and_then(at) {
        return Some(format!("std::thread running {f}"));
    }
    match crate::threads::type_name(&s) {
        Some(t) => {
            let ty = demangle_type(t.trim_start_matches('*'));
            // `std::thread::_State_impl<std::thread::_Invoker<std::tuple<F, args...> > >`: F.
            let callable = ty
                .find("std::tuple<")
                .map(|i| ty[i + "std::tuple<".len()..].trim_end_matches(['>', ' ']))
                .unwrap_or(&ty)
                .to_string();
            let run = if s.run != 0 { at(s.run) } else { None };
            Some(match run {
                Some(r) => format!("std::thread running {callable} ({r})"),
                None => format!("std::thread running {callable}"),
            })
        }
        None if s.start != 0 => at(s.start).map(|r| format!("thread start routine {r}")),
        None => None,
    }
}

/// Window ops given a launching line at most (each costs a symbolization).
const WINDOW_SITES: usize = 32;

/// A device-side assert tied to the error being reported.
#[derive(Clone)]
struct TiedAssert {
    /// The first tied line, parsed.
    assert: DeviceAssert,
    /// The tied lines name more than one function: none of them can pick the culprit.
    ambiguous: bool,
}

/// The device-side assert lines the driver printed (`real::printf`) that belong to this error:
/// only for `CUDA_ERROR_ASSERT` (710; another code is not an assert, whatever a line printed for
/// another context says), and only lines printed at or after `since` (the launch of the first
/// unfinished op of the reporting context, `blame::unfinished_since`: a line printed before it
/// belongs to an earlier error). The first such line is parsed; `lines` counts every assert line
/// printed. The assert line does not say its device or context: two devices that assert in the
/// same time span give lines that cannot be told apart, so lines naming different functions make
/// it ambiguous.
fn device_assert(rc: CUresult, since: Option<u64>) -> Option<TiedAssert> {
    // CUDA_ERROR_ASSERT (cuda.h `cudaError_enum`): "a device-side assert triggered during
    // kernel execution".
    if rc != 710 {
        return None;
    }
    let (lines, seen) = real::printf::captured();
    let mut tied = lines
        .into_iter()
        .filter(|(_, t)| since.is_none_or(|s| *t == 0 || *t >= s));
    let (text, _) = tied.next()?;
    let assert = DeviceAssert::parse(text, seen);
    let ambiguous = tied.any(|(t, _)| DeviceAssert::parse(t, 0).kernel != assert.kernel);
    Some(TiedAssert { assert, ambiguous })
}

/// Whether this process is an MPS client: the MPS control daemon's pipe directory
/// (`CUDA_MPS_PIPE_DIRECTORY`, default `/tmp/nvidia-mps`) holds its `control` pipe. The driver
/// connects to the daemon whenever it finds it (NVIDIA MPS documentation, "Architecture").
fn mps_client() -> bool {
    let dir = std::env::var_os("CUDA_MPS_PIPE_DIRECTORY")
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/tmp/nvidia-mps".into());
    std::path::Path::new(&dir).join("control").exists()
}

/// The program frame that launched an op, `function at file:line`: the innermost Python frame of
/// the program's own files, else the innermost native frame with a source line outside the CUDA
/// headers and nvcc's stubs.
fn program_frame(o: &Op) -> Option<String> {
    let describe = |f: &Frame| {
        Some(format!(
            "{} at {}:{}",
            f.function.as_deref().unwrap_or("??"),
            f.file.as_deref()?,
            f.line?
        ))
    };
    let py = o.python.python_stack.iter().find(|f| {
        f.file.as_deref().is_some_and(|file| {
            !file.contains("/site-packages/")
                && !file.contains("/dist-packages/")
                && !file.contains("/lib/python3")
                && !file.starts_with("<frozen ")
        })
    });
    if let Some(d) = py.and_then(describe) {
        return Some(d);
    }
    o.stack
        .iter()
        .filter(|f| {
            f.file.as_deref().is_some_and(|file| {
                !file.contains("/crt/") && !file.contains(".stub.c") && !file.contains("/cuda/")
            }) && f.line.is_some()
        })
        .find_map(describe)
}

/// The rank of this process in a multi-process job: `RANK` (torchrun), `SLURM_PROCID`,
/// `OMPI_COMM_WORLD_RANK`, else 0 (the command computes it the same way).
pub(crate) fn rank() -> u32 {
    pattern::rank_from_env()
}

/// This host's name (what `gethostname` says; the command computes it the same way).
pub(crate) fn host_name() -> String {
    pattern::host_name()
}

/// When this library was loaded, wall-clock ns since the Unix epoch (`CLOCK_REALTIME`); 0 until
/// [`note_load_time`] ran.
static LOADED_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs when the dynamic loader initializes this library (at the program's start under
/// `LD_PRELOAD`, before `main`): reads one clock and the working directory and stores them,
/// nothing else (no allocation, no file, no lock).
extern "C" fn note_load_time() {
    // ISO C: errno is 0 at `main`; a failed getcwd (deleted or too deep start folder) set it.
    let _errno = crate::safety::KeepErrno::now();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; clock_gettime is async-signal-safe and needs no
    // initialized state.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } == 0 {
        let ns = (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64;
        LOADED_NS.store(ns, std::sync::atomic::Ordering::Relaxed);
    }
    START_DIR.note();
}

/// The working directory when the library was loaded ([`note_load_time`]): what a relative
/// report or trace path is relative to, wherever the program has moved since
/// (`sink::write_file`). A fixed buffer written once by the loader's initializer, before any
/// thread of the program can read it, then published by its length; with the folder's identity
/// (device and inode), which outlives its name: a start folder (or a parent) renamed while the
/// program runs is still the current folder, and its old path names no folder or another.
struct StartDir {
    bytes: std::cell::UnsafeCell<[u8; libc::PATH_MAX as usize]>,
    /// Bytes of the path in `bytes`; 0: unknown (longer than the buffer, or `getcwd` failed).
    len: std::sync::atomic::AtomicUsize,
    /// `st_dev` and `st_ino` of the folder, written before `len`.
    dev: std::sync::atomic::AtomicU64,
    ino: std::sync::atomic::AtomicU64,
}

// SAFETY: `bytes` is written only by `note`, which the loader runs once before the library's
// other code can run on any thread, and read only after `len` (Release / Acquire) says so.
unsafe impl Sync for StartDir {}

static START_DIR: StartDir = StartDir {
    bytes: std::cell::UnsafeCell::new([0; libc::PATH_MAX as usize]),
    len: std::sync::atomic::AtomicUsize::new(0),
    dev: std::sync::atomic::AtomicU64::new(0),
    ino: std::sync::atomic::AtomicU64::new(0),
};

impl StartDir {
    fn note(&self) {
        let buf = self.bytes.get().cast::<libc::c_char>();
        // SAFETY: the buffer is PATH_MAX bytes, owned by this static and not read before `len`
        // is set below; getcwd writes at most that many bytes, NUL included.
        if unsafe { libc::getcwd(buf, libc::PATH_MAX as usize) }.is_null() {
            return;
        }
        // SAFETY: getcwd succeeded, so the buffer holds a NUL-terminated path.
        let len = unsafe { std::ffi::CStr::from_ptr(buf) }.to_bytes().len();
        // SAFETY: `stat` is plain integers, for which all zeroes is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: "." is NUL-terminated and `st` a valid out pointer; stat allocates nothing.
        if unsafe { libc::stat(c".".as_ptr(), &mut st) } != 0 {
            return;
        }
        self.dev
            .store(st.st_dev, std::sync::atomic::Ordering::Relaxed);
        self.ino
            .store(st.st_ino, std::sync::atomic::Ordering::Relaxed);
        self.len.store(len, std::sync::atomic::Ordering::Release);
    }

    /// The directory and its (device, inode), if they were read at load.
    fn get(&'static self) -> Option<(&'static std::path::Path, (u64, u64))> {
        use std::os::unix::ffi::OsStrExt;
        let len = self.len.load(std::sync::atomic::Ordering::Acquire);
        if len == 0 {
            return None;
        }
        // SAFETY: `len` bytes were written before `len` was published, and never again.
        let all: &'static [u8; libc::PATH_MAX as usize] = unsafe { &*self.bytes.get() };
        let bytes = &all[..len];
        let id = (
            self.dev.load(std::sync::atomic::Ordering::Relaxed),
            self.ino.load(std::sync::atomic::Ordering::Relaxed),
        );
        Some((std::path::Path::new(std::ffi::OsStr::from_bytes(bytes)), id))
    }
}

/// The folder a relative report or trace path is anchored at where that is not the working
/// directory: the folder the program started in (when the library was loaded), once the program
/// has moved out of it, while its path as read at load still leads there; else, the start folder
/// lost (renamed or deleted after the program moved out), the working directory named in full,
/// since a relative path in the line and the report would read as the user's own folder. `None`
/// while the working directory is still the start folder, whatever its name now (it or a parent
/// renamed: its old path names no folder, or another one), or when the start folder was not read
/// at load. Found by break-it reviews: the report was lost when the start folder was renamed,
/// and named relative to the wrong folder when it was gone.
pub(crate) fn anchor_dir() -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let (path, start) = START_DIR.get()?;
    let id = |p: &std::path::Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    if id(std::path::Path::new(".")) == Some(start) {
        return None;
    }
    if id(path) == Some(start) {
        return Some(path.to_path_buf());
    }
    std::env::current_dir().ok()
}

#[used]
#[link_section = ".init_array"]
static NOTE_LOAD_TIME: extern "C" fn() = note_load_time;

/// This process's start as the report gives it (`process.start_time_ns`): when the library was
/// loaded into it, wall-clock ns. Later than the start of any process that ended before this
/// one began, which `/proc`'s start time (whole-second boot time plus 10 ms ticks) is not. A
/// forked child keeps its parent's (summary counts it in the parent's run).
fn start_time_ns() -> Option<u64> {
    Some(LOADED_NS.load(std::sync::atomic::Ordering::Relaxed)).filter(|&ns| ns != 0)
}

fn process_info() -> Process {
    let argv = std::fs::read("/proc/self/cmdline")
        .map(|raw| {
            raw.split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    Process {
        start_time_ns: start_time_ns(),
        pid: std::process::id(),
        host: host_name(),
        rank: rank(),
        argv,
        local_rank: first_number(&["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"]),
        // A job of more than a million processes is a bad variable, not a job.
        world_size: first_number(&["WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"])
            .filter(|&n| n <= MAX_WORLD_SIZE),
        // torchrun sets TORCHELASTIC_RUN_ID=none without a rendezvous id.
        job_id: ["SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"]
            .iter()
            .find_map(|k| {
                std::env::var(k)
                    .ok()
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty() && v != "none")
            }),
    }
}

/// The first of `vars` that is set to a number.
/// Largest `WORLD_SIZE` taken as real.
pub(crate) const MAX_WORLD_SIZE: u32 = 1_000_000;

fn first_number(vars: &[&str]) -> Option<u32> {
    vars.iter()
        .find_map(|k| std::env::var(k).ok().and_then(|v| v.trim().parse().ok()))
}

/// A readable type name for a `std::thread` state: `_ZTS`-less mangled names demangle as types.
pub(crate) fn demangle_type(mangled: &str) -> String {
    let with_prefix = format!("_ZTS{mangled}");
    let d = stack::demangle(&with_prefix);
    d.strip_prefix("typeinfo name for ")
        .map(String::from)
        .unwrap_or(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_demangle() {
        assert_eq!(
            demangle_type("NSt6thread11_State_implINS_8_InvokerISt5tupleIJZ4mainEUlvE_EEEEEE"),
            "std::thread::_State_impl<std::thread::_Invoker<std::tuple<main::{lambda()#1}> > >"
        );
    }
}
