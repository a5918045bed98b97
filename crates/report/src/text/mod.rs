//! The human report on stderr: error, culprit with its launch stack, the reporting call, other
//! suspects, a timeline of the last ops (CPU launches beside GPU states), and a line per stream.
//!
//! Serde and std only, like the whole crate: the library writes it, `cudablame show` prints it.
//!
//! Files by job: `lead` the lead block, `frames` launch stacks, `names` op and kernel
//! names, `timeline` the timeline; this file assembles them.

mod frames;
mod lead;
mod names;
mod note;
mod timeline;

pub use names::{brief, op_brief, recorded_ops};
pub use note::error_string_note;

use frames::stacks;
use lead::{failed_itself, lead, sentence};
use names::{numbered, op_line, short};
use timeline::timeline;

use crate::model::{Report, StreamSummary};
use std::fmt::Write;

/// `s`, cut to `max` characters with a `…` when longer: user input echoed in one-line messages
/// (the library's warnings, the command's refusals).
pub fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_string(),
    }
}

/// A value as one-line messages echo it: quoted and escaped (`{:?}`), cut at 64 characters.
pub fn shown(raw: &str) -> String {
    shorten(&format!("{raw:?}"), 64)
}

/// Cuts `s` to `width` characters, ending in `...` when cut.
pub(super) fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let kept: String = s.chars().take(width.saturating_sub(3)).collect();
    format!("{kept}...")
}

pub(super) fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The device-side assert's text (`file:line: function: block [..], thread [..] Assertion `cond`
/// failed.`), when the report has one (`culprit.device_assert`): the lead block renders it as
/// `assert:   <text>`, between the launching line and the hint.
pub fn device_assert(r: &Report) -> Option<String> {
    r.culprit.device_assert.as_ref().map(|a| a.text.clone())
}

/// `s` with each control character (a newline, an escape sequence) replaced by its Rust escape
/// (`\n`, `\u{1b}`): a path the user configured (`CUDABLAME_REPORT=$'/tmp/a\nb'`) stays on its
/// line and cannot drive the terminal.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    s.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect::<String>()
        .into()
}

/// Candidate lines the shortened details list (the rest are counted; `--verbose` and the JSON
/// have them all).
const CANDIDATES_SHOWN: usize = 12;

/// Renders the report: the lead block (what to fix), then the details, shortened (the verbose
/// form is `cudablame show --verbose`). Frames left out are said to be in the JSON report only
/// when one was written (`r.path` set: the library renders after writing it).
/// The most streams the text lists (`--verbose`: all): those with unfinished work first. A
/// process with thousands of streams made a report of thousands of lines on stderr, written
/// inside the program's failing call (found by a break-it review: 118 KB for 2,000 streams,
/// and a parent that read the program's stderr only after it exited waited forever on the
/// full pipe). The JSON report lists them all.
pub const STREAMS_SHOWN: usize = 8;

/// One line per stream (`stream S (device D): issued I, completed C`), those with unfinished
/// work first, at most [`STREAMS_SHOWN`] unless `verbose`, then how many more.
fn streams(out: &mut String, r: &Report, verbose: bool) {
    let unfinished = |s: &&StreamSummary| s.issued > s.completed;
    let ordered =
        (r.streams.iter().filter(unfinished)).chain(r.streams.iter().filter(|s| !unfinished(s)));
    let shown = if verbose {
        r.streams.len()
    } else {
        STREAMS_SHOWN
    };
    for s in ordered.take(shown) {
        let _ = writeln!(
            out,
            "stream {} (device {}): issued {}, completed {}",
            s.stream, s.device, s.issued, s.completed
        );
    }
    if r.streams.len() > shown {
        let more = r.streams.len() - shown;
        let busy = r
            .streams
            .iter()
            .filter(unfinished)
            .count()
            .saturating_sub(shown);
        let _ = writeln!(
            out,
            "and {more} more streams ({busy} with unfinished work; all in the JSON report)"
        );
    }
}

pub fn render(r: &Report) -> String {
    render_with(r, device_assert(r).as_deref(), false, r.path.is_some())
}

/// Everything: all frames kept in the text, the full confidence reasoning and every other op.
pub fn render_verbose(r: &Report) -> String {
    render_with(r, device_assert(r).as_deref(), true, r.path.is_some())
}

/// A report read from a JSON report (`cudablame show`, also from standard input, where `r.path`
/// is not set): the frames the text leaves out are in that JSON.
pub fn render_read(r: &Report, verbose: bool) -> String {
    render_with(r, device_assert(r).as_deref(), verbose, true)
}

/// Renders the report; `verbose` keeps every frame, the whole reasoning and all other ops;
/// `json_kept` says whether a JSON report holds what the text leaves out (else the text says
/// that no JSON report was written, and how to get one).
pub fn render_with(
    r: &Report,
    device_assert: Option<&str>,
    verbose: bool,
    json_kept: bool,
) -> String {
    let mut out = String::new();
    let e = &r.error;
    let _ = writeln!(
        out,
        "\n==== cudablame: {} ({}): {} ====",
        e.name, e.code, e.description
    );
    lead(&mut out, r, device_assert);
    let _ = writeln!(out, "---- details ----");
    match &r.culprit.op {
        Some(o) => {
            let what = match &o.kernel {
                Some(k) => numbered(
                    o.seq,
                    &format!("kernel {}", if verbose { k.clone() } else { short(k) }),
                ),
                None => op_line(o),
            };
            let verdict = if r.culprit.is_one_of() {
                format!(
                    "{:?}, one of {}, ranked first",
                    r.culprit.confidence, r.culprit.one_of
                )
            } else {
                format!("{:?}", r.culprit.confidence)
            };
            let _ = writeln!(out, "culprit [{verdict}]: {what}");
            let shared = if o.shared_mem_bytes > 0 || verbose {
                format!(" shared {} B", o.shared_mem_bytes)
            } else {
                String::new()
            };
            let thread = if verbose {
                format!(", thread {}", o.thread)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "    grid ({},{},{}) block ({},{},{}){shared}, stream {}, device {}{thread}, launched {} before the error",
                o.grid[0], o.grid[1], o.grid[2], o.block[0], o.block[1], o.block[2],
                o.stream, o.device, ms(o.age_ns)
            );
            let why = if verbose {
                r.culprit.reason.clone()
            } else {
                sentence(&r.culprit.reason, 110)
            };
            let _ = writeln!(out, "    why: {why}");
            let site = if o.stack_from_site && !o.stack.is_empty() {
                " (native frames as at its launch site's first launch)"
            } else {
                ""
            };
            let _ = writeln!(out, "    launched by {} from{site}:", o.entry_point);
            stacks(&mut out, &o.python, &o.stack, verbose, json_kept);
            if let Some(t) = &o.thread_start {
                let _ = writeln!(out, "    on a thread started as: {t}");
            }
        }
        None => {
            let _ = writeln!(out, "culprit [{:?}]: not identified", r.culprit.confidence);
            let _ = writeln!(out, "    why: {}", r.culprit.reason);
        }
    }
    if let Some(n) = &r.culprit.not_exact {
        let _ = writeln!(out, "    not exact: {n}");
    }
    // Shortened: the first CANDIDATES_SHOWN (a window of several streams far behind can have
    // hundreds: 128 lines of a 211-line report in a fresh-user trial); the rest are counted.
    let shown = if verbose {
        r.culprit.candidates.len()
    } else {
        CANDIDATES_SHOWN
    };
    for (i, c) in r.culprit.candidates.iter().enumerate().take(shown) {
        let _ = writeln!(
            out,
            "    candidate {}: #{} {} (stream {}){}: {}",
            i + 1,
            c.seq,
            c.kernel.as_deref().map(brief).unwrap_or_else(|| "?".into()),
            c.stream,
            c.launched_at
                .as_deref()
                .map(|l| format!(", launched by {l}"))
                .unwrap_or_default(),
            c.evidence
        );
    }
    let more = r.culprit.candidates.len().saturating_sub(shown);
    if more > 0 {
        let _ = writeln!(
            out,
            "    ... and {more} more candidates (cudablame show --verbose)"
        );
    }
    let c = &r.reporting_call;
    let _ = writeln!(
        out,
        "reported by: {} (thread {}{}), {}:",
        c.entry_point,
        c.thread,
        c.stream
            .as_deref()
            .map(|s| format!(", stream {s}"))
            .unwrap_or_default(),
        if failed_itself(r) {
            "the failing launch itself"
        } else {
            "which only noticed the error"
        }
    );
    stacks(&mut out, &c.python, &c.stack, verbose, json_kept);
    if let Some(note) = &c.python_note {
        let _ = writeln!(out, "    {note}");
    }
    if verbose && !r.suspects.is_empty() {
        // Each with its launch stack (a fresh-user trial: two candidates launched through one
        // helper read alike, and the callers that told them apart were only in the JSON).
        let _ = writeln!(out, "other unfinished ops:");
        for o in &r.suspects {
            let _ = writeln!(
                out,
                "  {} (stream {}), launched from:",
                op_line(o),
                o.stream
            );
            stacks(&mut out, &o.python, &o.stack, verbose, json_kept);
        }
    } else if !r.suspects.is_empty() {
        let shown = 3;
        let list: Vec<String> = r.suspects.iter().take(shown).map(op_brief).collect();
        let more = r.suspects.len().saturating_sub(shown);
        let _ = writeln!(
            out,
            "other unfinished ops: {}{}",
            list.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    timeline(&mut out, r);
    streams(&mut out, r, verbose);
    if let Some(p) = r.path.as_deref().map(printable) {
        let _ = writeln!(out, "json report: {p}");
        if !verbose {
            let _ = writeln!(out, "all frames and details: cudablame show --verbose {p}");
        }
    }
    if let Some(p) = r.trace_path.as_deref().map(printable) {
        let _ = writeln!(out, "trace: {p} (open in https://ui.perfetto.dev)");
    }
    let _ = writeln!(
        out,
        "==== end of cudablame report (built in {}) ====",
        ms(r.build_ns)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::lead::program_frame;
    use super::*;
    use crate::fixtures::sample;
    use crate::model::{Frame, PythonFrames};

    /// The shortened details list the first 12 candidates and count the rest; `--verbose`
    /// lists them all (a window of 128 filled most of a report: fresh-user trial).
    #[test]
    fn a_long_candidate_list_is_shortened_and_counted() {
        let mut r = sample();
        r.culprit.candidates = (1..=40)
            .map(|seq| crate::model::Candidate {
                seq,
                stream: "legacy".into(),
                kernel: Some(format!("k{seq}")),
                launched_at: None,
                evidence: "not completed".into(),
                unknown_ops: 0,
            })
            .collect();
        let short = render(&r);
        let lines = |t: &str| {
            t.lines()
                .filter(|l| l.starts_with("    candidate "))
                .count()
        };
        assert_eq!(lines(&short), 12, "{short}");
        assert!(short.contains("    candidate 12: #12 k12 "), "{short}");
        assert!(!short.contains("    candidate 13:"), "{short}");
        assert!(
            short.contains("    ... and 28 more candidates (cudablame show --verbose)"),
            "{short}"
        );
        let all = render_verbose(&r);
        assert_eq!(lines(&all), 40);
        assert!(!all.contains("more candidates"));
    }

    /// At most STREAMS_SHOWN stream lines, the streams with unfinished work first, and a count
    /// of the rest; `--verbose` lists all (a break-it review: 2,000 streams made 2,056 lines on
    /// stderr, written inside the program's failing call).
    #[test]
    fn many_streams_are_counted_not_listed() {
        let mut r = sample();
        let stream = |n: u64, unfinished: bool| crate::model::StreamSummary {
            stream: format!("0x{n:x}"),
            context: "0x1".into(),
            device: 0,
            issued: 5,
            completed: if unfinished { 4 } else { 5 },
            marker: None,
            recent: Vec::new(),
        };
        // 2,000 streams, every 100th with unfinished work: 20 of them.
        r.streams = (1..=2000).map(|n| stream(n, n % 100 == 0)).collect();
        let text = render(&r);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("stream 0x"))
            .collect();
        assert_eq!(lines.len(), STREAMS_SHOWN, "{text}");
        assert!(
            lines.iter().all(|l| l.ends_with("issued 5, completed 4")),
            "{text}"
        );
        assert!(
            text.contains(
                "and 1992 more streams (12 with unfinished work; all in the JSON report)"
            ),
            "{text}"
        );
        let all = render_verbose(&r);
        assert_eq!(
            all.lines().filter(|l| l.starts_with("stream 0x")).count(),
            2000
        );
        assert!(!all.contains("more streams"));
    }

    /// `--verbose` lists each other unfinished op with its launch stack (a fresh-user trial: two
    /// candidates launched through one helper read alike in the text, and the callers that told
    /// them apart were only in the JSON); the short text keeps one line.
    #[test]
    fn verbose_lists_each_unfinished_ops_launch_stack() {
        let mut r = sample();
        r.suspects[0].stack = vec![Frame {
            function: Some("launch_from_the_second_caller".into()),
            file: Some("prog.c".into()),
            line: Some(35),
            module: Some("/tmp/prog".into()),
            address: "0x1234".into(),
        }];
        let all = render_verbose(&r);
        let at = all
            .lines()
            .position(|l| l.starts_with("  #3 ") && l.ends_with("launched from:"))
            .unwrap_or_else(|| panic!("{all}"));
        assert!(
            all.lines()
                .skip(at)
                .any(|l| l.contains("launch_from_the_second_caller")),
            "{all}"
        );
        let short = render(&r);
        assert!(short.contains("other unfinished ops: "), "{short}");
        assert!(!short.contains("launch_from_the_second_caller"), "{short}");
    }

    #[test]
    fn shorten_cuts_long_input() {
        assert_eq!(shorten("abc", 5), "abc");
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(shown("on"), "\"on\"");
    }

    #[test]
    fn a_graph_is_named_by_all_its_kernels_never_by_its_last() {
        assert_eq!(
            brief("graph: void at::k<int, float>(int*, float), oob_write(int*), quick"),
            "graph: k, oob_write, quick"
        );
        assert_eq!(brief("void at::native::k<4>(int)"), "k");
    }

    #[test]
    fn a_graph_culprit_not_run_as_captured_says_so() {
        let mut r = sample();
        let op = r.culprit.op.as_mut().unwrap();
        op.kind = crate::model::OpKind::Graph;
        op.kernel = Some("graph: fill".into());
        let graph = |changed, by_hand| crate::model::GraphOps {
            ops: Vec::new(),
            captured_at: Vec::new(),
            captured_by_thread: 1,
            changed_after_capture: changed,
            built_by_hand: by_hand,
        };
        op.graph = Some(graph(false, false));
        assert!(!render(&r).contains("graph:    "), "{}", render(&r));
        r.culprit.op.as_mut().unwrap().graph = Some(graph(true, false));
        let text = render(&r);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("graph:    changed after capture"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(lines[at - 1].starts_with("launched:"), "{text}");
        r.culprit.op.as_mut().unwrap().graph = Some(graph(false, true));
        assert!(
            render(&r).contains("graph:    built by hand (cuGraphCreate)"),
            "{}",
            render(&r)
        );
    }

    #[test]
    fn a_window_verdict_lists_its_ops_in_stream_order() {
        use crate::model::{Candidate, Confidence};
        let mut r = sample();
        let entry = |seq: u64, kernel: Option<&str>, at: Option<&str>, unknown: u64| Candidate {
            seq,
            stream: "legacy".into(),
            kernel: kernel.map(String::from),
            launched_at: at.map(String::from),
            evidence: "a kernel, never completed before in the recorded ops".into(),
            unknown_ops: unknown,
        };
        r.culprit.confidence = Confidence::Likely;
        r.culprit.one_of = 5;
        r.culprit.window = vec![
            entry(
                2,
                Some("void ns::k2<float>(float*, int)"),
                Some("main at app.cu:10"),
                0,
            ),
            entry(3, Some("void ns::k3<float>(float*, int)"), None, 0),
            entry(4, None, None, 3),
        ];
        r.culprit.candidates = r.culprit.window[..2].to_vec();
        let text = render(&r);
        let lines: Vec<&str> = text.lines().skip(2).take(5).collect();
        assert_eq!(
            lines[0],
            "culprit:  one of these 5 ops, in stream order (stream legacy; likely: no progress marker between them)"
        );
        assert_eq!(lines[1], "          #2 k2  launched: main at app.cu:10");
        assert_eq!(lines[2], "          #3 k3");
        assert_eq!(
            lines[3],
            "          #4..#6: 3 ops no longer held, kernels unknown"
        );
        assert!(
            lines[4].starts_with("ranked:   #2 k2: a kernel, never completed"),
            "{text}"
        );
        assert_eq!(r.culprit.verdict(), "one of 5 ops, likely");
        // An old reader's view: the JSON keeps every old field, and a report without the new
        // ones reads as before.
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["culprit"]["confidence"], "likely");
        assert_eq!(json["culprit"]["window"][2]["unknown_ops"], 3);
        assert!(json["culprit"]["window"][0].get("unknown_ops").is_none());
        assert!(json["culprit"].get("beyond").is_none());
        assert_eq!(sample().culprit.verdict(), "exact");
        // Work cudablame does not hold may hold the culprit: said under the window's line, and
        // in the one-line verdict.
        r.culprit.beyond = Some("3 destroyed stream(s) ... are no longer kept".into());
        let text = render(&r);
        let lines: Vec<&str> = text.lines().skip(2).take(3).collect();
        assert_eq!(
            lines[1],
            "          or work cudablame does not hold: 3 destroyed stream(s) ... are no longer kept"
        );
        assert_eq!(lines[2], "          #2 k2  launched: main at app.cu:10");
        assert_eq!(r.culprit.verdict(), "one of 5 ops or work not held, likely");
    }

    #[test]
    fn lead_block_names_kernel_line_assert_hint_and_reporting_line_in_order() {
        let mut r = sample();
        let frame = |function: &str, file: &str, line| Frame {
            function: Some(function.into()),
            file: Some(file.into()),
            line: Some(line),
            module: None,
            address: "0x0".into(),
        };
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("train.py");
        std::fs::write(
            &script,
            "import torch\n\n    loss = F.cross_entropy(logits, target)  \n",
        )
        .unwrap();
        let script = script.display().to_string();
        let op = r.culprit.op.as_mut().unwrap();
        op.kernel = Some(
            "void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*)"
                .into(),
        );
        op.python.python_stack = vec![
            frame(
                "cross_entropy",
                "/venv/lib/python3.12/site-packages/torch/nn/functional.py",
                3494,
            ),
            frame("compute_loss", &script, 3),
            frame("main", &script, 1),
        ];
        r.culprit.hint = Some("check the target's range against the number of classes".into());
        r.reporting_call.python.python_stack = vec![frame("main", &script, 1)];
        let text = render_with(&r, Some("Loss.cu:250: block: [0,0,0], thread: [1,0,0] Assertion `t >= 0 && t < n_classes` failed."), false, true);
        let lines: Vec<&str> = text.lines().skip(1).take(8).collect();
        assert_eq!(
            lines[0],
            "==== cudablame: CUDA_ERROR_ILLEGAL_ADDRESS (700): illegal ===="
        );
        assert_eq!(
            lines[1],
            "culprit:  nll_loss_forward_reduce_cuda_kernel_2d  (op #2, exact)"
        );
        assert_eq!(lines[2], format!("launched: compute_loss at {script}:3"));
        assert_eq!(lines[3].trim(), "loss = F.cross_entropy(logits, target)");
        assert!(
            lines[4].starts_with("assert:   Loss.cu:250: block"),
            "{text}"
        );
        assert_eq!(
            lines[5],
            "hint:     check the target's range against the number of classes"
        );
        assert_eq!(
            lines[6],
            format!("reported: main at {script}:1 (cuMemcpyDtoH_v2, which only noticed the error)")
        );
        assert_eq!(lines[7].trim(), "import torch");
        // Without a device assert in the report, no assert line.
        assert!(r.culprit.device_assert.is_none());
        assert!(!render(&r).contains("assert:"));
        // Verbose keeps the whole name; the default cuts the reasoning and hides thread ids.
        assert!(render_verbose(&r).contains("kernel void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*)"));
    }

    #[test]
    fn nvcc_host_stub_and_headers_are_not_the_launching_line() {
        let f = |function: &str, file: &str, line| Frame {
            function: Some(function.into()),
            file: Some(file.into()),
            line: Some(line),
            module: None,
            address: "0x0".into(),
        };
        let native = vec![
            f(
                "__cudaLaunchKernel_helper",
                "/usr/local/cuda/include/crt/device_functions.h",
                2963,
            ),
            f(
                "__device_stub__Z9oob_writePii(int*, int)",
                "/tmp/tmpxft_0000_stub.c",
                1,
            ),
            f("oob_write(int*, int)", "/src/oob_write.cu", 58),
            f("launch_oob_write(int)", "/src/oob_write.cu", 78),
        ];
        let mut native = native;
        native.insert(
            0,
            Frame {
                module: Some("/lib/x86_64-linux-gnu/libc.so.6".into()),
                ..f(
                    "__libc_start_call_main",
                    "./csu/../sysdeps/nptl/libc_start_call_main.h",
                    58,
                )
            },
        );
        let none = PythonFrames::default();
        let got = program_frame(&none, &native, Some("oob_write(int*, int)")).unwrap();
        assert_eq!(
            (got.function.as_deref(), got.line),
            (Some("launch_oob_write(int)"), Some(78))
        );
    }

    #[test]
    fn kernel_names_are_cut_to_their_base_name() {
        assert_eq!(
            brief("void at::native::vectorized_elementwise_kernel<4, F>(int, F)"),
            "vectorized_elementwise_kernel"
        );
        assert_eq!(brief("oob_write"), "oob_write");
        assert_eq!(brief("ns::k(int)"), "k");
        let torch = "void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(\
                     c10::Scalar const&)::{lambda()#1}>(int, F, R)";
        assert_eq!(brief(torch), "elementwise_kernel_with_index");
        let nested = "void at::native::index_elementwise_kernel<128, 4, void at::native::gpu_index_kernel<\
                      void at::native::index_kernel_impl<at::native::OpaqueType<4> >(at::TensorIteratorBase&)>(F)";
        assert_eq!(brief(nested), "index_elementwise_kernel");
    }

    #[test]
    fn old_reports_without_new_fields_deserialize() {
        let r = sample();
        assert_eq!(
            (
                r.process.local_rank,
                r.process.world_size,
                r.process.job_id.as_deref()
            ),
            (None, None, None)
        );
        assert!(!r.streams[0].recent[0].synchronous);
    }

    #[test]
    fn timeline_keeps_the_culprit_and_fits_100_columns() {
        let text = render(&sample());
        let start = text.find("timeline").expect("a timeline");
        let lines: Vec<&str> = text[start..]
            .lines()
            .take_while(|l| !l.starts_with("stream "))
            .collect();
        assert!(lines.len() <= 13, "{}", lines.join("\n"));
        assert!(
            lines.iter().all(|l| l.chars().count() <= 100),
            "{}",
            lines.join("\n")
        );
        assert!(
            lines[1].contains("legacy") && lines[1].contains("0xabc"),
            "{}",
            lines[1]
        );
        let culprit = lines
            .iter()
            .find(|l| l.contains("<== CULPRIT"))
            .expect("culprit row");
        assert!(
            culprit.contains("#2 k2") && culprit.contains("-98.000 ms"),
            "{culprit}"
        );
        assert!(
            lines.iter().any(|l| l.contains("... 4 more ops")),
            "{}",
            lines.join("\n")
        );
        let last = lines.last().unwrap();
        assert!(
            last.contains("cuMemcpyDtoH_v2") && last.contains("REPORTED HERE"),
            "{last}"
        );
        // Each op appears once, in launch order.
        assert_eq!(text.matches("#12 k12").count(), 1);
    }

    /// A frame of function `function` in `/bin/app`, without file and line.
    fn frame(function: &str) -> Frame {
        Frame {
            function: Some(function.into()),
            file: None,
            line: None,
            module: Some("/bin/app".into()),
            address: "0x0".into(),
        }
    }

    #[test]
    fn verbose_shows_the_frames_after_main() {
        let mut r = sample();
        r.culprit.op.as_mut().unwrap().stack =
            vec![frame("launch"), frame("main"), frame("__libc_start_main")];
        r.path = Some("r.json".into());
        let short = render(&r);
        assert!(
            short.contains("... 1 more frames in the JSON report"),
            "{short}"
        );
        let all = render_verbose(&r);
        assert!(all.contains("#2  __libc_start_main  [app]"), "{all}");
        assert!(!all.contains("more frames in the JSON report"), "{all}");
    }

    #[test]
    fn a_refused_launch_has_no_number_in_the_text_or_the_json() {
        // A non-sticky launch error: the driver refused the launch, so it was never enqueued
        // and has no sequence number (the library gives it 0).
        let mut r = sample();
        r.culprit.op.as_mut().unwrap().seq = 0;
        let text = render_verbose(&r);
        assert!(!text.contains("#0 "), "{text}");
        assert!(
            text.contains("culprit [Exact]: kernel void ns::k2<float>(float*, int) (not enqueued)"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["culprit"]["op"].get("seq").is_none(), "{json}");
        assert_eq!(json["suspects"][0]["seq"], 3);
        // And it reads back as the op without a number.
        let back: Report = serde_json::from_value(json).unwrap();
        assert_eq!(back.culprit.op.unwrap().seq, 0);
    }

    #[test]
    fn frames_left_out_are_said_to_be_in_the_json_only_when_one_was_written() {
        let mut r = sample();
        let stack: Vec<Frame> = (0..9).map(|i| frame(&format!("f{i}"))).collect();
        r.culprit.op.as_mut().unwrap().stack = stack;
        // No JSON written (CUDABLAME_REPORT=off, or the write failed): the text says so.
        r.path = None;
        let text = render(&r);
        assert!(!text.contains("in the JSON report"), "{text}");
        assert!(
            text.contains(
                "... 3 more frames not shown: no JSON report was written \
                 (CUDABLAME_REPORT=off or unwritable)"
            ),
            "{text}"
        );
        // A JSON written: the frames are there, and `show --verbose` prints them.
        r.path = Some("/r/cudablame-h-1.json".into());
        let text = render(&r);
        assert!(
            text.contains("... 3 more frames in the JSON report\n"),
            "{text}"
        );
        assert!(
            text.contains("all frames and details: cudablame show --verbose /r/cudablame-h-1.json"),
            "{text}"
        );
        // A path with a newline (a configured pattern) stays on its line.
        r.path = Some("/r/a\nb.json".into());
        let text = render(&r);
        assert!(text.contains("json report: /r/a\\nb.json\n"), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("b.json")), "{text}");
        // `show` of a report read from standard input: the JSON is at hand though unnamed.
        r.path = None;
        let text = render_read(&r, false);
        assert!(
            text.contains("... 3 more frames in the JSON report\n"),
            "{text}"
        );
        assert!(!text.contains("no JSON report was written"), "{text}");
    }
}
