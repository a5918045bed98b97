//! The JSON report: a contract for tools. Schema `cudablame.report/1`; fields may be added, the
//! names here are never changed.
//!
//! Standalone on purpose (serde and std only): the `cudablame` command includes this file and
//! `text.rs` to read and render reports without linking the preload library.

use serde::{Deserialize, Serialize};

/// How sure a verdict is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Progress markers prove this op started and never finished, and no other op was unfinished.
    Exact,
    /// Markers narrow it to one op per stream; several streams had unfinished work.
    Likely,
    /// No markers: one of the ops issued since the last successful synchronization.
    Suspect,
}

/// What a recorded op is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Kernel,
    Memcpy,
    Memset,
    Graph,
}

/// One symbolized host frame.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Frame {
    /// Demangled function name (Rust and C++), if the module has symbols.
    pub function: Option<String>,
    /// Source file, if the module has line tables (`-g`).
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Path of the shared object or executable holding the address.
    pub module: Option<String>,
    /// The instruction address, `0x`-prefixed hex.
    pub address: String,
}

pub const SCHEMA: &str = "cudablame.report/1";

#[derive(Serialize, Deserialize, Debug)]
pub struct Report {
    pub schema: String,
    pub process: Process,
    pub error: ErrorInfo,
    pub reporting_call: ReportingCall,
    pub culprit: Culprit,
    /// Other ops that had not completed, most likely first.
    pub suspects: Vec<Op>,
    pub streams: Vec<StreamSummary>,
    /// ns spent building this report (snapshot, kernel names, symbolization) before writing it.
    #[serde(default)]
    pub build_ns: u64,
    /// Path of this JSON file (`None` with `CUDABLAME_REPORT=off`); not part of the JSON.
    #[serde(skip)]
    pub path: Option<String>,
    /// Path of the Chrome trace written with `CUDABLAME_TRACE`; not part of the JSON.
    #[serde(skip)]
    pub trace_path: Option<String>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct Process {
    pub pid: u32,
    pub host: String,
    /// From `RANK`, `SLURM_PROCID` or `OMPI_COMM_WORLD_RANK`, else 0.
    pub rank: u32,
    pub argv: Vec<String>,
    /// Rank on this node: `LOCAL_RANK`, `SLURM_LOCALID` or `OMPI_COMM_WORLD_LOCAL_RANK`, else null.
    #[serde(default)]
    pub local_rank: Option<u32>,
    /// Processes in the job: `WORLD_SIZE`, `SLURM_NTASKS` or `OMPI_COMM_WORLD_SIZE`, else null.
    #[serde(default)]
    pub world_size: Option<u32>,
    /// `SLURM_JOB_ID`, else `TORCHELASTIC_RUN_ID`, else null.
    #[serde(default)]
    pub job_id: Option<String>,
    /// When cudablame was loaded into the process (at its start under `LD_PRELOAD`), wall-clock
    /// ns since the Unix epoch (`CLOCK_REALTIME`); null in reports written before this field
    /// existed. `summary` tells runs of one job apart by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time_ns: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct ErrorInfo {
    pub code: u32,
    /// E.g. `CUDA_ERROR_ASSERT` (from `cuGetErrorName`).
    pub name: String,
    /// E.g. `device-side assert triggered` (from `cuGetErrorString`).
    pub description: String,
    /// Whether the code poisons the context (every later call returns it).
    pub sticky: bool,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct ReportingCall {
    /// The exported driver symbol that returned the error, e.g. `cuMemcpyDtoH_v2`.
    pub entry_point: String,
    pub thread: u32,
    /// The stream the call concerned, if any (`0x…`, `legacy`, `per-thread(tid)`).
    pub stream: Option<String>,
    /// Wall-clock ns since the Unix epoch.
    pub time_ns: u64,
    pub stack: Vec<Frame>,
    /// Python frames of the reporting thread, like [`Op::python`].
    #[serde(flatten)]
    pub python: PythonFrames,
    /// Why Python frames are missing or incomplete in a CPython process, e.g. `python frames
    /// unavailable (CPython 3.14 not supported)`; said once per report, here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_note: Option<String>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct Culprit {
    pub confidence: Confidence,
    pub reason: String,
    /// `None` when the culprit is not known or fell out of the ring.
    pub op: Option<Op>,
    /// One line of advice for well-known kernels (loss, indexing), e.g. which input to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The device-side assert the driver printed (710), if any: it names the kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_assert: Option<DeviceAssert>,
    /// The ops that can have faulted (the window, see `window`), most likely first, with the
    /// evidence for its rank; only when there were several (or a device-side assert chose one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<Candidate>,
    /// Why the verdict is not `exact`, in one line (absent when it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_exact: Option<String>,
    /// The ops that can have faulted, in stream order (streams one after the other, in the order
    /// their windows began): on each
    /// stream with unfinished work, the ops after the last one proven complete (progress marker or
    /// synchronization) up to and including the first with a progress marker behind it. A
    /// `likely` verdict with several reads "one of these N ops". Absent when the verdict rests on
    /// one op alone, and in reports written before this field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window: Vec<Candidate>,
    /// How many ops the window holds, those no longer held included (`Candidate::unknown_ops`);
    /// 0 without progress markers.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub one_of: u64,
    /// Work cudablame does not hold that may hold the culprit, in one line (work of an entry
    /// point it does not record, destroyed streams no longer kept, work enqueued while it was
    /// paused): then the window is not all that can have faulted. Absent otherwise, and in
    /// reports written before this field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Culprit {
    /// Whether the verdict is "one of these N ops" (`likely` with a window of several ops).
    pub fn is_one_of(&self) -> bool {
        self.confidence == Confidence::Likely && self.one_of > 1 && !self.window.is_empty()
    }

    /// The verdict in words for one line: `exact`, `one of 4 ops, likely`, `one of 4 ops or
    /// work not held, likely` (see `beyond`), `likely`, `suspect`.
    pub fn verdict(&self) -> String {
        let word = format!("{:?}", self.confidence).to_lowercase();
        match (self.is_one_of(), &self.beyond) {
            (true, None) => format!("one of {} ops, {word}", self.one_of),
            (true, Some(_)) => format!("one of {} ops or work not held, {word}", self.one_of),
            (false, _) => word,
        }
    }
}

/// A device-side assert message, as the driver printed it on stdout:
/// `FILE:LINE: KERNEL: block: [x,y,z], thread: [x,y,z] Assertion `COND` failed.`
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct DeviceAssert {
    /// The first assert line printed.
    pub text: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The kernel as the message names it (often without namespace and template arguments).
    pub kernel: Option<String>,
    pub block: Option<[u32; 3]>,
    pub thread: Option<[u32; 3]>,
    pub condition: Option<String>,
    /// Assert lines printed in all (one per failing thread).
    #[serde(default)]
    pub lines: u64,
    /// Whether the assert's kernel is the culprit op's kernel.
    #[serde(default)]
    pub matches_culprit: bool,
}

/// One op that can have faulted (see [`Culprit::candidates`] and [`Culprit::window`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Candidate {
    pub seq: u64,
    pub stream: String,
    pub kernel: Option<String>,
    /// The program frame that launched it (`function at file:line`), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_at: Option<String>,
    /// The evidence behind its rank, in words.
    pub evidence: String,
    /// When not 0: this entry stands for that many ops from `seq` on that cudablame no longer
    /// held (they fell out of the ring and the held list): kernel and launch site unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown_ops: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Op {
    /// Position in its stream, from 1 (ops recorded by cudablame on that stream). 0: a launch the
    /// driver refused (a non-sticky launch error, the culprit of its own report): it was never
    /// enqueued and has no number, and the JSON has no `seq` for it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seq: u64,
    pub kind: OpKind,
    /// Demangled kernel name (kernels), else `None`.
    pub kernel: Option<String>,
    /// The name as the driver gave it (mangled).
    pub kernel_symbol: Option<String>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
    /// Bytes copied or set (copies, memsets).
    pub bytes: u64,
    pub stream: String,
    /// `0x…` context handle.
    pub context: String,
    pub device: i32,
    pub thread: u32,
    /// The entry point that enqueued it, e.g. `cuLaunchKernel_ptsz`.
    pub entry_point: String,
    /// Launch time, wall-clock ns since the Unix epoch.
    pub time_ns: u64,
    /// ns between the launch and the reporting call.
    pub age_ns: u64,
    /// `completed`, `not completed`, or `culprit`.
    pub state: String,
    /// A synchronous copy or memset (it had completed when it returned).
    #[serde(default)]
    pub synchronous: bool,
    pub stack: Vec<Frame>,
    /// `stack` is the native stack of the op's launch site (the same Python stack launching the
    /// same kernel by the same entry point), copied at the site's first launch and shared by its
    /// later launches (`CUDABLAME_STACK=native`);
    /// the op's stack held the same return addresses at the same places, so the frames are its
    /// own (a launch by another native path copies its own stack). Absent (false) when `stack`
    /// was copied for this op.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stack_from_site: bool,
    /// Python frames of the launching thread (the JSON fields `python_stack`,
    /// `python_stack_from_thread`, `python_stack_borrowed_from`).
    #[serde(flatten)]
    pub python: PythonFrames,
    /// For a graph launch: what the graph runs, as captured (absent for other ops, and for graphs
    /// whose capture cudablame did not see).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphOps>,
    /// What the launching thread was started to run, when it was created by `pthread_create`
    /// (a `std::thread`'s callable, or the start routine), e.g. `std::thread running
    /// main::{lambda()#1} (_M_run at app.cu:40)`. Absent for the main thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_start: Option<String>,
}

/// Python frames of one thread, as they appear in an op and in the reporting call.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct PythonFrames {
    /// Innermost first (CPython 3.10 to 3.13): `function` is the qualified name, `file` and
    /// `line` the source position, `module` is `None` and `address` the bytecode offset. Empty
    /// when the thread ran no Python.
    #[serde(default)]
    pub python_stack: Vec<Frame>,
    /// Set when the frames from index `python_stack_borrowed_from` on are not the launching
    /// thread's but those of this thread, which had called `backward()` (the launch came from an
    /// autograd worker thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_stack_from_thread: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_stack_borrowed_from: Option<usize>,
}

/// The kernels captured into a graph, and where the capture began: what the executable graph
/// ran at this launch, as far as cudablame followed it.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct GraphOps {
    /// Captured ops in capture order (`seq` is the position in the graph, from 1). A graph launch
    /// captured into the graph is one op of kind `graph`, with its own `graph`.
    pub ops: Vec<Op>,
    /// Stack of the thread at `cuStreamBeginCapture` (for a graph built by hand: at
    /// `cuGraphCreate`).
    pub captured_at: Vec<Frame>,
    pub captured_by_thread: u32,
    /// The graph or this executable graph was changed before this launch in a way cudablame does
    /// not follow (CUDA driver API "Graph Management": a node's parameters set, a node added,
    /// destroyed, enabled or disabled, a capture into an existing graph): `ops` are what was
    /// captured, not necessarily what ran, and a device-side assert cannot make the verdict exact
    /// through them. False in reports written before this field existed.
    #[serde(default)]
    pub changed_after_capture: bool,
    /// The graph was built by hand (`cuGraphCreate`), never captured: `ops` is empty and what it
    /// runs is unknown. False in reports written before this field existed.
    #[serde(default)]
    pub built_by_hand: bool,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct StreamSummary {
    pub stream: String,
    pub context: String,
    pub device: i32,
    /// Sequence number of the last op issued.
    pub issued: u64,
    /// Highest sequence number known complete (marker or successful synchronization).
    pub completed: u64,
    /// The progress marker's value, if markers were in use on this stream.
    pub marker: Option<u64>,
    /// The last ops of the stream, oldest first.
    pub recent: Vec<Op>,
}

/// The qualified function name of a printed or demangled C++ function: no return type,
/// parameters or template arguments, the anonymous namespace written `(anonymous namespace)`
/// (`void a::<unnamed>::k<T>(T *) [with T=int]` and `a::(anonymous namespace)::k<int>(int*)` both
/// give `a::(anonymous namespace)::k`); `None` for lambdas and operators.
fn qualified_name(s: &str) -> Option<String> {
    let s = s
        .trim()
        .replace("(anonymous namespace)", "@anon")
        .replace("<unnamed>", "@anon")
        .replace("{anonymous}", "@anon");
    if s.contains("operator") || s.contains("lambda") {
        return None;
    }
    // Drop template arguments and the parameter list: keep text at depth 0 of <> and (), up to
    // the first '(' at depth 0 or " [with".
    let s = s.split(" [with ").next().unwrap_or(&s);
    let mut out = String::new();
    let mut depth = 0i32;
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 => break,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    // The name is the last word (a return type comes before it).
    let name = out.trim().rsplit(' ').next().unwrap_or("").to_string();
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '@');
    ok.then(|| name.replace("@anon", "(anonymous namespace)"))
}

// The parsing of device-assert lines (pure text; the library captures them, see its
// `real::printf`).

/// `[x,y,z]` at the start of `s`.
fn triple(s: &str) -> Option<[u32; 3]> {
    let inner = s.strip_prefix('[')?.split(']').next()?;
    let v: Vec<u32> = inner
        .split(',')
        .map(|x| x.trim().parse().ok())
        .collect::<Option<_>>()?;
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

impl DeviceAssert {
    /// Parses `text`, the first assert line the driver printed,
    /// `FILE:LINE: KERNEL: block: [x,y,z], thread: [x,y,z] Assertion `COND` failed.` (fields it
    /// lacks stay `None`); `lines` is how many assert lines were printed in all.
    pub fn parse(text: String, lines: u64) -> DeviceAssert {
        let mut out = DeviceAssert {
            lines,
            ..DeviceAssert::default()
        };
        let head_end = text.find(" block: [").unwrap_or(text.len());
        let head = text[..head_end].trim_end().trim_end_matches(':');
        // FILE:LINE: KERNEL — the first ":digits: " splits file from kernel.
        let bytes = head.as_bytes();
        for (i, _) in head.match_indices(':') {
            let digits = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let after = i + 1 + digits;
            if digits > 0 && head[after..].starts_with(": ") {
                out.file = Some(head[..i].to_string());
                out.line = head[i + 1..after].parse().ok();
                out.kernel = Some(head[after + 2..].trim().to_string()).filter(|k| !k.is_empty());
                break;
            }
        }
        if let Some(b) = text.find("block: ") {
            out.block = triple(&text[b + "block: ".len()..]);
        }
        if let Some(t) = text.find("thread: ") {
            out.thread = triple(&text[t + "thread: ".len()..]);
        }
        if let Some(a) = text.find("Assertion `") {
            let rest = &text[a + "Assertion `".len()..];
            let end = rest.rfind("` failed").unwrap_or(rest.len());
            out.condition = Some(rest[..end].to_string());
        }
        out.text = text;
        out
    }

    /// The bare function name of the kernel an assert names, for matching against demangled kernel
    /// names: `void at::native::k<float>(float*)` -> `k`; `None` for names that cannot identify a
    /// kernel (`operator()`, lambdas).
    pub fn kernel_base_name(printed: &str) -> Option<String> {
        let s = printed.trim();
        if s.contains("operator") || s.contains("lambda") {
            return None;
        }
        // Cut the parameter list: the first '(' at template depth 0.
        let mut depth = 0i32;
        let mut end = s.len();
        for (i, c) in s.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                '(' if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let mut s = &s[..end];
        // Cut trailing template arguments.
        if s.ends_with('>') {
            let mut depth = 0i32;
            for (i, c) in s.char_indices().rev() {
                match c {
                    '>' => depth += 1,
                    '<' => {
                        depth -= 1;
                        if depth == 0 {
                            s = &s[..i];
                            break;
                        }
                    }
                    _ => {}
                }
            }
        }
        let s = s.rsplit(' ').next().unwrap_or(s);
        let s = s.rsplit("::").next().unwrap_or(s);
        let ok = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        ok.then(|| s.to_string())
    }

    /// Whether the function a device-side assert names, as the driver printed it (`printed`),
    /// can be the kernel whose demangled name is `kernel`. The driver prints the name of the
    /// function holding the `assert`, as the source's assert macro passes it: `__PRETTY_FUNCTION__`
    /// for the CUDA headers' `assert` (with return type, namespaces, parameters, and templates
    /// as `k<T>(T *) [with T=float]`; an anonymous namespace as `<unnamed>`), `__func__` for
    /// PyTorch's `CUDA_KERNEL_ASSERT` (the bare name). A `__device__` helper prints its own
    /// name, so a name matching no kernel tells nothing. Printed with its qualification (it holds
    /// `(`), the qualified names must be equal; printed bare, the base names.
    pub fn printed_name_matches(printed: &str, kernel: &str) -> bool {
        let (Some(p), Some(k)) = (qualified_name(printed), qualified_name(kernel)) else {
            return false;
        };
        if printed.contains('(') {
            p == k
        } else {
            let base = |s: &str| s.rsplit("::").next().unwrap_or("").to_string();
            base(&p) == base(&k)
        }
    }

    /// Whether the demangled `kernel` name has `base` as a whole identifier.
    pub fn names_kernel(kernel: &str, base: &str) -> bool {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        kernel.match_indices(base).any(|(i, _)| {
            let before = kernel[..i].chars().next_back();
            let after = kernel[i + base.len()..].chars().next();
            !before.is_some_and(ident) && !after.is_some_and(ident)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TORCH: &str = "/pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [7,0,0] Assertion `t >= 0 && t < n_classes` failed.";

    #[test]
    fn parses_the_driver_line() {
        let a = DeviceAssert::parse(TORCH.to_string(), 1);
        assert_eq!(
            a.file.as_deref(),
            Some("/pytorch/aten/src/ATen/native/cuda/Loss.cu")
        );
        assert_eq!(a.line, Some(245));
        assert_eq!(
            a.kernel.as_deref(),
            Some("nll_loss_forward_reduce_cuda_kernel_2d")
        );
        assert_eq!(a.block, Some([0, 0, 0]));
        assert_eq!(a.thread, Some([7, 0, 0]));
        assert_eq!(a.condition.as_deref(), Some("t >= 0 && t < n_classes"));
        let b = DeviceAssert::parse(String::from("a.cu:12: void check_kernel(int *, int): block: [3,0,0], thread: [31,1,0] Assertion `x[i] < n` failed."), 1);
        assert_eq!(b.kernel.as_deref(), Some("void check_kernel(int *, int)"));
        assert_eq!(b.line, Some(12));
        assert_eq!(b.condition.as_deref(), Some("x[i] < n"));
    }

    #[test]
    fn base_names_and_matching() {
        assert_eq!(
            DeviceAssert::kernel_base_name("nll_loss_forward_reduce_cuda_kernel_2d").as_deref(),
            Some("nll_loss_forward_reduce_cuda_kernel_2d")
        );
        assert_eq!(
            DeviceAssert::kernel_base_name("void check_kernel(int *, int)").as_deref(),
            Some("check_kernel")
        );
        assert_eq!(
            DeviceAssert::kernel_base_name("void ns::k<float, 2>(float *)").as_deref(),
            Some("k")
        );
        assert_eq!(DeviceAssert::kernel_base_name("operator()"), None);
        let k = "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*)";
        assert!(DeviceAssert::names_kernel(
            k,
            "nll_loss_forward_reduce_cuda_kernel_2d"
        ));
        assert!(!DeviceAssert::names_kernel(k, "nll_loss_forward"));
        assert!(DeviceAssert::names_kernel("oob_assert", "oob_assert"));
    }

    #[test]
    fn printed_names_match_by_the_driver_rules() {
        let m = DeviceAssert::printed_name_matches;
        // `__PRETTY_FUNCTION__` (CUDA's assert): qualified names must agree.
        assert!(m(
            "void check_kernel(int *, int)",
            "check_kernel(int*, int)"
        ));
        assert!(!m(
            "void check_kernel(int *, int)",
            "other::check_kernel(int*, int)"
        ));
        assert!(m(
            "void other::check_kernel(int *, int)",
            "other::check_kernel(int*, int)"
        ));
        assert!(m(
            "void <unnamed>::check_kernel(int *)",
            "(anonymous namespace)::check_kernel(int*)"
        ));
        assert!(m(
            "void ns::k<T>(T *) [with T=float]",
            "void ns::k<float>(float*)"
        ));
        assert!(!m(
            "void k<T>(T *) [with T=float]",
            "void ns::k<float>(float*)"
        ));
        // `__func__` (PyTorch's CUDA_KERNEL_ASSERT): the bare name.
        let torch = "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*)";
        assert!(m("nll_loss_forward_reduce_cuda_kernel_2d", torch));
        assert!(!m("nll_loss_forward", torch));
        // A namespace or template argument of the same name is not the function.
        assert!(!m("check_kernel", "check_kernel::run(int*)"));
        assert!(!m("k", "apply<k>(int*)"));
        // A helper's name matches no kernel; lambdas name none.
        assert!(!m("void bounds_check(int)", "check_kernel(int*, int)"));
        assert!(!m("operator()", "void f<lambda()>(int*)"));
        assert!(!DeviceAssert::names_kernel("oob_assert2", "oob_assert"));
    }
}
