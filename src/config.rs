//! Every `CUDABLAME_*` variable, parsed once on first use. A bad value gets one line on stderr and
//! the default; the program is never affected. The README's "Configuration" table mirrors this.

use cudablame_report::text::shown;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which host stacks a launch record carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StackMode {
    /// No stack capture (cheapest).
    Off,
    /// Native frames: a copy of the stack's top per launch, unwound and symbolized when a
    /// report is written (`stack::copy`), shared by the later launches of one launch site whose
    /// stacks hold the same return addresses (`stack::sites`).
    Native,
    /// Native frames, a copy for every launch, Python frames or not (`CUDABLAME_STACK=every`).
    Every,
}

/// `CUDABLAME_MARKERS`: which recorded ops get a progress marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkerMode {
    /// No markers: nothing proves an op complete except a successful host synchronization.
    Off,
    /// Marker after an op only within the budget ([`Budget`]); the default.
    Budget,
    /// Marker after every op (+2.1 µs of GPU time and about +1.1 µs of host time per op on an
    /// H200, driver 580).
    Every,
}

/// The parsed configuration.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// `CUDABLAME_REPORT`: JSON report path pattern (`%p` pid, `%h` host, `%r` rank, `%%`),
    /// or `None` for `off`. Default `cudablame-%h-%p.json`, relative to the working directory.
    pub(crate) report: Option<String>,
    /// `CUDABLAME_TRACE`: Chrome trace / Perfetto JSON path pattern (same placeholders as
    /// `CUDABLAME_REPORT`), written with the report; `None` (the default, or `off`): no trace.
    pub(crate) trace: Option<String>,
    /// `CUDABLAME_MARKERS`: `budget` (default; also `on`), `every` or `off`: which recorded ops
    /// get a progress marker (`record::policy`).
    pub(crate) markers: MarkerMode,
    /// `CUDABLAME_MARKER_GAP_US`: under `budget`, µs of host time after a stream's last marker
    /// from which its next op is marked, 1..=1000000 (default 500: a marker costs about 2.1 µs
    /// of GPU time and 1.1 to 1.8 µs of host time on an H200, so about 0.4% of each; see
    /// `record::policy` for why not 100).
    pub(crate) marker_gap_us: u64,
    /// Whether a stream's gap may stretch past `marker_gap_us` with the host's marker cost
    /// (`record::policy::Marks::gap_ns`): true unless `CUDABLAME_MARKER_GAP_US` set the gap.
    pub(crate) marker_gap_stretch: bool,
    /// `CUDABLAME_MARKER_WINDOW`: under `budget`, the most ops of one stream between two
    /// markers, 2..=4096 (default 32): a fault is narrowed to at most this many ops in stream
    /// order even when the host launches them faster than the gap (`record::policy`).
    pub(crate) marker_window: u32,
    /// `CUDABLAME_STACK`: `native` (default), `every` or `off`.
    pub(crate) stack: StackMode,
    /// `CUDABLAME_STACK_DEPTH`: frames kept per launch, 1..=32 (default 16), cudablame's own
    /// frames not counted.
    pub(crate) stack_depth: usize,
    /// `CUDABLAME_STACK_BYTES`: bytes of the launching thread's stack copied per launch, from
    /// the driver entry point's frame upwards, 1024..=65536 (default 8192). The entry point's
    /// own frame is about 220 bytes of it (`interpose::hook` is out of line). Frames beyond the
    /// copy are not shown.
    pub(crate) stack_bytes: usize,
    /// The same in a process whose launches carry Python frames (a supported CPython with
    /// `CUDABLAME_PYTHON` on), for every launch of it (also from threads that run no Python code,
    /// such as PyTorch's autograd engine): `CUDABLAME_STACK_BYTES` when set, else 3072. There the
    /// Python frames name the launching line, and the native frames needed are those that name
    /// the library's op: on the H200 a PyTorch `nll_loss` assert's culprit kept 12 frames with
    /// 4096 bytes while the entry point's frame took 1,032 of them (libcudart,
    /// `cudaLaunchKernel`, the ATen CUDA kernel's launcher and its `wrapper_CUDA_...`, the
    /// dispatcher and autograd frames down to `at::native::nll_loss_symint`), 16 (the
    /// `CUDABLAME_STACK_DEPTH` limit) at 8192. 3072 bytes after a 220-byte entry frame hold
    /// about as many of the program's bytes as 4096 did after 1,032, in 48 cache lines instead
    /// of 64: the copy's lines are the largest part of what the hook writes per launch (issue 21).
    pub(crate) python_stack_bytes: usize,
    /// `CUDABLAME_RING`: ops kept per stream, 16..=65536 (default 256).
    pub(crate) ring: usize,
    /// `CUDABLAME_TEXT`: the human report on stderr (default on).
    pub(crate) text: bool,
    /// `CUDABLAME_DEBUG`: log interception decisions to stderr (default off).
    pub(crate) debug: bool,
    /// `CUDABLAME_PYTHON`: Python frames of the launching thread when the process is CPython
    /// 3.10 to 3.13 (default on).
    pub(crate) python: bool,
    /// `CUDABLAME_PYTHON_DEPTH`: Python frames kept per launch, 1..=64 (default 32).
    pub(crate) python_depth: usize,
    /// `CUDABLAME_STATS`: measure what recording costs per op and print one line at exit
    /// (default off; `record::cost`): `on` times each phase of an op, `total` only the hook's
    /// entry, its real call and its exit (cudablame's own time with the least measurement in it).
    pub(crate) stats: bool,
    /// `CUDABLAME_STATS=on` rather than `total`: each recorded op's phases are timed (about ten
    /// tick readings an op more, counted in the own time they measure).
    pub(crate) stats_phases: bool,
    /// `CUDABLAME_REPORT_NONSTICKY`: a launch that fails by itself (not sticky, e.g. 701 too
    /// many resources, which autotuners handle) gets a full report (default off: one stderr
    /// line, once, no file).
    pub(crate) report_nonsticky: bool,
    /// `CUDABLAME_ERROR_STRING`: after a sticky-error report, `cuGetErrorString` and
    /// `cudaGetErrorString` of that code append one `[cudablame: culprit ...]` line to the real
    /// text (default on; `detect::error_string`).
    pub(crate) error_string: bool,
    /// `CUDABLAME_TEST_PANIC` (test-only, undocumented for users): make cudablame's own code
    /// panic at this point, to prove the program is unaffected (`describe`, `record`, `report`,
    /// `resolve`).
    pub(crate) test_panic: Option<PanicPoint>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            report: Some("cudablame-%h-%p.json".into()),
            trace: None,
            markers: MarkerMode::Budget,
            marker_gap_us: 500,
            marker_gap_stretch: true,
            marker_window: 32,
            stack: StackMode::Native,
            stack_depth: 16,
            stack_bytes: 8192,
            python_stack_bytes: 3072,
            ring: 256,
            text: true,
            debug: false,
            python: true,
            python_depth: 32,
            stats: false,
            stats_phases: false,
            report_nonsticky: false,
            error_string: true,
            test_panic: None,
        }
    }
}

/// The most frames a record can hold (`CUDABLAME_STACK_DEPTH` upper bound).
pub(crate) const MAX_STACK_DEPTH: usize = 32;

/// The most Python frames a record can hold (`CUDABLAME_PYTHON_DEPTH` upper bound).
pub(crate) const MAX_PYTHON_DEPTH: usize = 64;

/// Fork-safe: see `safety::ForkSafeOnce` (parsing twice is harmless; the warnings are said by
/// the thread whose value wins only).
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static CONFIG: crate::safety::ForkSafeOnce<(Config, Vec<String>)> =
    crate::safety::ForkSafeOnce::new();
static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static MARKERS_FAILED: AtomicBool = AtomicBool::new(false);

/// The configuration of this process, read from the environment on first use.
///
/// Inlined: the hot path asks for it about ten times per recorded op (a call each cost some
/// 15 ns per op on the fake-driver launch loop); the first use is [`read`], out of line.
#[inline(always)]
pub(crate) fn get() -> &'static Config {
    match CONFIG.get() {
        Some((config, _)) => config,
        None => read(),
    }
}

/// [`get`]'s first use: parses the environment and says the warnings once.
#[cold]
#[inline(never)]
fn read() -> &'static Config {
    let (config, warnings) = CONFIG.get_or_init(|| {
        let (config, mut warnings) = Config::parse(|k| std::env::var_os(k));
        warnings.extend(unknown_variables(std::env::vars_os().map(|(k, _)| k)));
        (config, warnings)
    });
    if !WARNED.swap(true, Ordering::AcqRel) {
        for w in warnings {
            crate::safety::say(&format!("cudablame: {w}"));
        }
    }
    config
}

/// Whether progress markers are in use: configured on, and the driver has not refused one.
#[inline]
pub(crate) fn markers_enabled() -> bool {
    get().markers != MarkerMode::Off && !MARKERS_FAILED.load(Ordering::Relaxed)
}

/// Called when the driver refuses a marker write (e.g. `CUDA_ERROR_NOT_SUPPORTED`): markers stay
/// off for the rest of the process and reports fall back to `suspect`.
pub(crate) fn markers_failed(code: u32) {
    if !MARKERS_FAILED.swap(true, Ordering::Relaxed) {
        crate::safety::say(&format!(
            "cudablame: the driver refused a progress marker (cuStreamWriteValue64 returned {code}); \
             culprits will be named as suspects only"
        ));
    }
}

/// Every variable cudablame reads. Any other `CUDABLAME_*` variable is a typo, said once.
pub(crate) const VARIABLES: &[&str] = &[
    "CUDABLAME_REPORT",
    "CUDABLAME_TRACE",
    "CUDABLAME_MARKERS",
    "CUDABLAME_MARKER_GAP_US",
    "CUDABLAME_MARKER_WINDOW",
    "CUDABLAME_STACK",
    "CUDABLAME_STACK_DEPTH",
    "CUDABLAME_STACK_BYTES",
    "CUDABLAME_RING",
    "CUDABLAME_TEXT",
    "CUDABLAME_DEBUG",
    "CUDABLAME_PYTHON",
    "CUDABLAME_PYTHON_DEPTH",
    "CUDABLAME_STATS",
    "CUDABLAME_REPORT_NONSTICKY",
    "CUDABLAME_ERROR_STRING",
    "CUDABLAME_TEST_PANIC",
    // Read by the `cudablame` command (where libcudablame.so is), not by the library.
    "CUDABLAME_LIB",
    // A build setting of earlier versions (crates/cli/build.rs), which the README told users to
    // export; nothing reads it now (every build embeds the library), so it is accepted silently.
    "CUDABLAME_EMBED",
];

/// One warning per set `CUDABLAME_*` variable that cudablame does not know (a typo would
/// otherwise be silently ignored).
pub(crate) fn unknown_variables(names: impl Iterator<Item = std::ffi::OsString>) -> Vec<String> {
    let mut unknown: Vec<String> = names
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.starts_with("CUDABLAME_") && !VARIABLES.contains(&n.as_str()))
        .collect();
    unknown.sort();
    unknown
        .into_iter()
        .map(|n| {
            format!(
                "{} is not a cudablame variable (ignored; see `cudablame --help`)",
                shown(&n)
            )
        })
        .collect()
}

/// The on/off words every switch accepts (`1`, `on`, `yes`, `true` / `0`, `off`, `no`, `false`,
/// any case, spaces around), or `None`.
fn on_off_word(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some(true),
        "0" | "off" | "no" | "false" => Some(false),
        _ => None,
    }
}

fn on_off(name: &str, raw: &str, default: bool, warnings: &mut Vec<String>) -> bool {
    match on_off_word(raw) {
        Some(b) => b,
        None => {
            warnings.push(format!(
                "{name}={} is not on/off; using {}",
                shown(raw),
                if default { "on" } else { "off" }
            ));
            default
        }
    }
}

fn number(
    name: &str,
    raw: &str,
    lo: usize,
    hi: usize,
    default: usize,
    w: &mut Vec<String>,
) -> usize {
    number_in(name, raw, lo, hi).unwrap_or_else(|bad| {
        w.push(format!("{bad}; using {default}"));
        default
    })
}

/// `raw` as a number in `lo..=hi`, else the start of the warning (`NAME=value is not a number in
/// lo..=hi`).
fn number_in(name: &str, raw: &str, lo: usize, hi: usize) -> Result<usize, String> {
    match raw.trim().parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!(
            "{name}={} is not a number in {lo}..={hi}",
            shown(raw)
        )),
    }
}

impl Config {
    /// Parses from a variable lookup; returns the config and one warning per bad variable.
    pub(crate) fn parse(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> (Config, Vec<String>) {
        let mut c = Config::default();
        let mut w = Vec::new();
        let get = |k: &str| var(k).map(|v| v.to_string_lossy().into_owned());
        // Paths must survive as given: a lossy conversion would write somewhere else.
        let path = |k: &str, w: &mut Vec<String>, fallback: &str| {
            let v = var(k)?;
            match v.to_str() {
                Some(s) => Some(s.to_string()),
                None => {
                    w.push(format!("{k} is not valid UTF-8; {fallback}"));
                    None
                }
            }
        };
        if let Some(v) = path("CUDABLAME_REPORT", &mut w, "using cudablame-%h-%p.json") {
            let t = v.trim();
            if cudablame_report::pattern::is_off(t) {
                c.report = None;
            } else if t.is_empty() {
                w.push("CUDABLAME_REPORT is empty; using cudablame-%h-%p.json".into());
            } else if let Some(problem) = cudablame_report::pattern::problem(t) {
                w.push(format!(
                    "CUDABLAME_REPORT={}: {problem}; using cudablame-%h-%p.json",
                    shown(t)
                ));
            } else {
                c.report = Some(t.to_string());
            }
        }
        if let Some(v) = path("CUDABLAME_TRACE", &mut w, "writing no trace") {
            let t = v.trim();
            if t.is_empty() {
                w.push("CUDABLAME_TRACE is empty; writing no trace".into());
            } else if let Some(problem) = cudablame_report::pattern::problem(t) {
                w.push(format!(
                    "CUDABLAME_TRACE={}: {problem}; writing no trace",
                    shown(t)
                ));
            } else if !cudablame_report::pattern::is_off(t) {
                c.trace = Some(t.to_string());
            }
        }
        if let Some(v) = get("CUDABLAME_REPORT_NONSTICKY") {
            c.report_nonsticky = on_off("CUDABLAME_REPORT_NONSTICKY", &v, false, &mut w);
        }
        if let Some(v) = get("CUDABLAME_ERROR_STRING") {
            c.error_string = on_off("CUDABLAME_ERROR_STRING", &v, true, &mut w);
        }
        if let Some(v) = get("CUDABLAME_MARKERS") {
            c.markers = match v.trim().to_ascii_lowercase().as_str() {
                "budget" | "1" | "on" | "yes" | "true" => MarkerMode::Budget,
                "every" | "all" => MarkerMode::Every,
                "0" | "off" | "no" | "false" => MarkerMode::Off,
                _ => {
                    w.push(format!(
                        "CUDABLAME_MARKERS={} is not budget/every/off; using budget",
                        shown(&v)
                    ));
                    MarkerMode::Budget
                }
            };
        }
        if let Some(v) = get("CUDABLAME_MARKER_GAP_US") {
            let warned = w.len();
            c.marker_gap_us =
                number("CUDABLAME_MARKER_GAP_US", &v, 1, 1_000_000, 500, &mut w) as u64;
            // A gap given is kept as given; a bad one falls back to the default, stretch and all
            // (and says so: "using 500" alone read as a gap kept at 500, found by a break-it
            // helper).
            c.marker_gap_stretch = w.len() > warned;
            if let Some(bad) = w.get_mut(warned) {
                bad.push_str(" (the default: stretched where marker writes are slow)");
            }
        }
        if let Some(v) = get("CUDABLAME_MARKER_WINDOW") {
            c.marker_window = number("CUDABLAME_MARKER_WINDOW", &v, 2, 4096, 32, &mut w) as u32;
        }
        if let Some(v) = get("CUDABLAME_STACK") {
            c.stack = match v.trim().to_ascii_lowercase().as_str() {
                // The on/off words and `all` as `CUDABLAME_MARKERS` takes them (a fresh-user
                // trial: `all` was taken there and refused here).
                "native" | "1" | "on" | "yes" | "true" => StackMode::Native,
                "every" | "all" => StackMode::Every,
                "0" | "off" | "no" | "false" | "none" => StackMode::Off,
                _ => {
                    w.push(format!(
                        "CUDABLAME_STACK={} is not native/every/off; using native",
                        shown(&v)
                    ));
                    StackMode::Native
                }
            };
        }
        if let Some(v) = get("CUDABLAME_STACK_DEPTH") {
            c.stack_depth = number("CUDABLAME_STACK_DEPTH", &v, 1, MAX_STACK_DEPTH, 16, &mut w);
        }
        if let Some(v) = get("CUDABLAME_STACK_BYTES") {
            // One value for both sizes; a bad one keeps both defaults.
            match number_in("CUDABLAME_STACK_BYTES", &v, 1024, 65536) {
                Ok(n) => (c.stack_bytes, c.python_stack_bytes) = (n, n),
                Err(bad) => w.push(format!(
                    "{bad}; using {} ({} in a CPython process)",
                    c.stack_bytes, c.python_stack_bytes
                )),
            }
        }
        if let Some(v) = get("CUDABLAME_RING") {
            c.ring = number("CUDABLAME_RING", &v, 16, 65536, 256, &mut w);
        }
        if let Some(v) = get("CUDABLAME_TEXT") {
            c.text = on_off("CUDABLAME_TEXT", &v, true, &mut w);
        }
        if let Some(v) = get("CUDABLAME_DEBUG") {
            c.debug = on_off("CUDABLAME_DEBUG", &v, false, &mut w);
        }
        if let Some(v) = get("CUDABLAME_PYTHON") {
            c.python = on_off("CUDABLAME_PYTHON", &v, true, &mut w);
        }
        if let Some(v) = get("CUDABLAME_PYTHON_DEPTH") {
            c.python_depth = number(
                "CUDABLAME_PYTHON_DEPTH",
                &v,
                1,
                MAX_PYTHON_DEPTH,
                32,
                &mut w,
            );
        }
        if let Some(v) = get("CUDABLAME_STATS") {
            let total = v.trim().eq_ignore_ascii_case("total");
            (c.stats, c.stats_phases) = match on_off_word(&v) {
                _ if total => (true, false),
                Some(on) => (on, on),
                None => {
                    w.push(format!(
                        "CUDABLAME_STATS={} is not on, total or off; using off",
                        shown(&v)
                    ));
                    (false, false)
                }
            };
        }
        if let Some(v) = get("CUDABLAME_TEST_PANIC") {
            c.test_panic = PanicPoint::parse(v.trim());
            if c.test_panic.is_none() {
                w.push(format!(
                    "CUDABLAME_TEST_PANIC={} is not describe/record/report/resolve (a test-only variable); ignored",
                    shown(&v)
                ));
            }
        }
        (c, w)
    }
}

/// Where `CUDABLAME_TEST_PANIC` (test-only) makes cudablame's own code panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PanicPoint {
    /// Describing a hooked call from its arguments, before the real call.
    Describe,
    /// Recording around the real call (launch rings, synchronization bookkeeping).
    Record,
    /// Building or writing the report.
    Report,
    /// Choosing the wrapper for a function resolved by `dlsym` / `cuGetProcAddress`.
    Resolve,
}

impl PanicPoint {
    pub(crate) fn parse(s: &str) -> Option<PanicPoint> {
        match s {
            "describe" => Some(PanicPoint::Describe),
            "record" => Some(PanicPoint::Record),
            "report" => Some(PanicPoint::Report),
            "resolve" => Some(PanicPoint::Resolve),
            _ => None,
        }
    }
}

/// Panics if `CUDABLAME_TEST_PANIC` names `point` (tests of the no-panic guarantee).
#[inline]
pub(crate) fn test_panic(point: PanicPoint) {
    if get().test_panic == Some(point) {
        panic!("CUDABLAME_TEST_PANIC={point:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> (Config, Vec<String>) {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::parse(|k| m.get(k).map(Into::into))
    }

    #[test]
    fn defaults_without_variables() {
        let (c, w) = parse(&[]);
        assert!(w.is_empty());
        assert_eq!(c.report.as_deref(), Some("cudablame-%h-%p.json"));
        assert_eq!(c.trace, None);
        assert_eq!(c.markers, MarkerMode::Budget);
        assert_eq!(c.marker_gap_us, 500);
        assert_eq!(c.stack, StackMode::Native);
        assert_eq!((c.stack_depth, c.ring), (16, 256));
    }

    #[test]
    fn good_values_are_taken() {
        let (c, w) = parse(&[
            ("CUDABLAME_REPORT", "off"),
            ("CUDABLAME_MARKERS", "off"),
            ("CUDABLAME_STACK", "off"),
            ("CUDABLAME_STACK_DEPTH", "8"),
            ("CUDABLAME_RING", "1024"),
            ("CUDABLAME_TRACE", " trace-%h-r%r.json "),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.report, None);
        assert_eq!(c.trace.as_deref(), Some("trace-%h-r%r.json"));
        assert_eq!(c.markers, MarkerMode::Off);
        assert_eq!(c.stack, StackMode::Off);
        assert_eq!((c.stack_depth, c.ring), (8, 1024));
        for (v, mode) in [
            ("every", StackMode::Every),
            ("all", StackMode::Every),
            (" Native ", StackMode::Native),
            ("yes", StackMode::Native),
            ("none", StackMode::Off),
            ("0", StackMode::Off),
        ] {
            let (c, w) = parse(&[("CUDABLAME_STACK", v)]);
            assert!(w.is_empty(), "{v}: {w:?}");
            assert_eq!(c.stack, mode, "{v}");
        }
    }

    #[test]
    fn bad_values_warn_once_each_and_keep_defaults() {
        let (c, w) = parse(&[
            ("CUDABLAME_MARKERS", "maybe"),
            ("CUDABLAME_STACK_DEPTH", "-3"),
            ("CUDABLAME_RING", "99999999999999999999999"),
            ("CUDABLAME_STACK", ""),
            ("CUDABLAME_REPORT", "  "),
            ("CUDABLAME_TRACE", ""),
        ]);
        assert_eq!(w.len(), 6, "{w:?}");
        assert_eq!(c.trace, None);
        assert!(w[0].contains("CUDABLAME_REPORT"));
        assert_eq!(c.markers, MarkerMode::Budget);
        assert_eq!((c.stack_depth, c.ring), (16, 256));
        assert_eq!(c.report.as_deref(), Some("cudablame-%h-%p.json"));
    }

    #[test]
    fn on_words_and_unknown_escapes_in_paths_warn_and_keep_defaults() {
        for v in ["on", "1", "true", "TRUE"] {
            let (c, w) = parse(&[("CUDABLAME_TRACE", v)]);
            assert_eq!(c.trace, None, "{v}");
            assert_eq!(w.len(), 1, "{w:?}");
            assert!(
                w[0].contains("is not a path") && w[0].contains("writing no trace"),
                "{w:?}"
            );
        }
        let (c, w) = parse(&[("CUDABLAME_REPORT", "%q%")]);
        assert_eq!(c.report.as_deref(), Some("cudablame-%h-%p.json"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("unknown escape %q"), "{w:?}");
        let (c, w) = parse(&[("CUDABLAME_TRACE", "t-%x.json")]);
        assert_eq!((c.trace, w.len()), (None, 1));
        let (c, w) = parse(&[("CUDABLAME_REPORT", "r-50%")]);
        assert!(w[0].contains("lone %"), "{w:?}");
        assert_eq!(c.report.as_deref(), Some("cudablame-%h-%p.json"));
        // Good patterns pass.
        let (c, w) = parse(&[
            ("CUDABLAME_REPORT", "d/r-%h-%p-%r-100%%.json"),
            ("CUDABLAME_TRACE", "t.json"),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.report.as_deref(), Some("d/r-%h-%p-%r-100%%.json"));
        assert_eq!(c.trace.as_deref(), Some("t.json"));
    }

    #[test]
    fn marker_modes_and_gap() {
        for (v, want) in [
            ("budget", MarkerMode::Budget),
            (" ON ", MarkerMode::Budget),
            ("every", MarkerMode::Every),
            ("Every", MarkerMode::Every),
            ("off", MarkerMode::Off),
            ("0", MarkerMode::Off),
        ] {
            let (c, w) = parse(&[("CUDABLAME_MARKERS", v)]);
            assert!(w.is_empty(), "{v}: {w:?}");
            assert_eq!(c.markers, want, "{v}");
        }
        let (c, w) = parse(&[("CUDABLAME_MARKERS", "2"), ("CUDABLAME_MARKER_GAP_US", "0")]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(
            (c.markers, c.marker_gap_us, c.marker_gap_stretch),
            (MarkerMode::Budget, 500, true)
        );
        assert!(
            w[1].ends_with("using 500 (the default: stretched where marker writes are slow)"),
            "{w:?}"
        );
        let (c, w) = parse(&[("CUDABLAME_MARKER_GAP_US", "250")]);
        assert!(w.is_empty(), "{w:?}");
        // A gap given is kept as given: the host's marker cost does not stretch it.
        assert_eq!((c.marker_gap_us, c.marker_gap_stretch), (250, false));
        assert!(parse(&[]).0.marker_gap_stretch);
        let (c, w) = parse(&[("CUDABLAME_MARKER_WINDOW", "64")]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.marker_window, 64);
        let (c, w) = parse(&[("CUDABLAME_MARKER_WINDOW", "1")]);
        assert_eq!((w.len(), c.marker_window), (1, 32), "{w:?}");
    }

    #[test]
    fn stats_modes() {
        for (v, want) in [
            ("on", (true, true)),
            ("1", (true, true)),
            ("total", (true, false)),
            (" TOTAL ", (true, false)),
            ("off", (false, false)),
        ] {
            let (c, w) = parse(&[("CUDABLAME_STATS", v)]);
            assert!(w.is_empty(), "{v}: {w:?}");
            assert_eq!((c.stats, c.stats_phases), want, "{v}");
        }
        let (c, w) = parse(&[("CUDABLAME_STATS", "phases")]);
        assert_eq!(
            (w.len(), c.stats, c.stats_phases),
            (1, false, false),
            "{w:?}"
        );
        assert!(w[0].contains("not on, total or off"), "{w:?}");
    }

    #[test]
    fn trace_off_is_no_trace() {
        let (c, w) = parse(&[("CUDABLAME_TRACE", "OFF")]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.trace, None);
    }

    #[test]
    fn python_variables() {
        let (c, w) = parse(&[]);
        assert!(w.is_empty());
        assert!(c.python);
        assert_eq!(c.python_depth, 32);
        let (c, w) = parse(&[
            ("CUDABLAME_PYTHON", "off"),
            ("CUDABLAME_PYTHON_DEPTH", "64"),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert!(!c.python);
        assert_eq!(c.python_depth, 64);
        let (c, w) = parse(&[
            ("CUDABLAME_PYTHON", "sometimes"),
            ("CUDABLAME_PYTHON_DEPTH", "65"),
        ]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("CUDABLAME_PYTHON=") && w[1].contains("CUDABLAME_PYTHON_DEPTH"),
            "{w:?}"
        );
        assert!(c.python);
        assert_eq!(c.python_depth, 32);
    }
}
