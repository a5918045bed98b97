//! From the recorded streams and an error to a verdict: which op faulted, how sure we are, and
//! which other ops had not completed. Pure logic over [`StreamView`]s, unit-tested without FFI.
//!
//! Rule (the window): on each stream, ops up to `completed` (the progress marker's value, or what
//! a successful synchronization proved) finished. The ops after it, up to and including the first
//! one with a progress marker enqueued behind it (`OpRecord::marked`), or up to the last issued op
//! when none has one, are that stream's WINDOW: one of them started and never finished, and
//! nothing tells which (with sparse markers, an op without a marker behind it proves nothing when
//! it completes). A window op that cudablame no longer holds (it fell out of the ring and the held
//! list, `record::ring`, or the ring was busy) is UNKNOWN: it still counts. Only the device of the context
//! that reported the error is considered, all its contexts (a fault stops the device: `scope`). For a device-side assert
//! (710) only window ops that run kernels can have raised it: copies and memsets are no
//! candidates ([`Clues::kernels_only`]).
//!
//! Verdicts:
//! - `exact`: the windows of all streams with unfinished work hold exactly one op in all, and it
//!   is known; or a device-side assert tied to this error (code 710, printed after the window's
//!   first launch: `report`) names the kernel of exactly one op among all window ops while every
//!   window op's kernel list is known ([`KernelList::complete`]; an unknown op, a graph whose
//!   capture was cut or not seen, a kernel without a name "may run it").
//! - `likely`: markers on every stream with unfinished work, more than one op in the windows:
//!   "one of these N ops, in stream order" (`Verdict::window`). They are ranked only by evidence
//!   that can be stated ([`rank`]): an op running the kernel the assert names first; kernels
//!   before communication kernels (`nccl*`, which wait on peers), copies and memsets (no user
//!   code runs); then a kernel that never completed before in the recorded ops before one that
//!   did; then, across streams, the stream whose window began last; inside one stream, stream
//!   order.
//! - `suspect`: a stream with unfinished work has no markers: the most recent kernel among the
//!   unfinished ops (or the one kernel the assert names).
//!
//! Afterwards [`cap_for_unseen_work`] and [`cap_for_code`] keep a verdict below `exact` when work
//! cudablame never saw may hide the culprit, or when the error code itself does not imply that the
//! running op faulted (702, 999, an MPS client).

use crate::record::{OpKind, OpRecord, StreamView};

pub(crate) use cudablame_report::model::Confidence;

/// Where an op sits in the views: `(stream index, op index in that stream's ring)`.
pub(crate) type OpAt = (usize, usize);

/// One op that can have faulted, with the evidence for its rank.
#[derive(Debug, PartialEq, Clone)]
pub(crate) struct Ranked {
    /// Stream index in the views.
    pub(crate) stream: usize,
    pub(crate) seq: u64,
    /// `None` for ops cudablame no longer holds: then `unknown` ops from `seq` on.
    pub(crate) at: Option<OpAt>,
    /// Ops this entry stands for when `at` is `None` (0 otherwise).
    pub(crate) unknown: u64,
    pub(crate) evidence: String,
}

/// The verdict.
#[derive(Debug, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) confidence: Confidence,
    /// The culprit op (the first ranked known window op), if it is still held.
    pub(crate) culprit: Option<OpAt>,
    /// Why, in one sentence, with the numbers that prove it.
    pub(crate) reason: String,
    /// The other unfinished ops, most likely first.
    pub(crate) suspects: Vec<OpAt>,
    /// The window ops, most likely first (only when there were several, or with an assert).
    pub(crate) candidates: Vec<Ranked>,
    /// The window ops in stream order (streams in the order their windows began), unknown spans
    /// included; empty when the verdict rests on one op alone.
    pub(crate) window: Vec<Ranked>,
    /// Ops in the windows, known and unknown (0 without markers).
    pub(crate) one_of: u64,
    /// Why the verdict is not exact, in one line (`None` when it is).
    pub(crate) not_exact: Option<String>,
    /// Work no ring holds that may hold the culprit, in one line (`cap_for_unseen_work`): the
    /// window, however many ops it lists, is then not all that can have faulted.
    pub(crate) beyond: Option<String>,
    /// A device-side assert's kernel matched the culprit's kernel.
    pub(crate) assert_matched: bool,
}

/// Suspects listed at most.
pub(crate) const MAX_SUSPECTS: usize = 16;

/// The kernels an op runs, as far as the report knows them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct KernelList {
    /// Demangled names: its kernel, or a graph launch's captured kernels; empty for copies and
    /// memsets.
    pub(crate) names: Vec<String>,
    /// Whether `names` are all the kernels it runs: false for a kernel the driver gave no name
    /// for, and for a graph launch whose capture cudablame did not see or cut
    /// (`record::graphs` keeps 1,024 ops per graph), built by hand or changed after capture:
    /// such an op "may run" any kernel.
    pub(crate) complete: bool,
    /// A graph launch whose graph was changed after capture (`record::graphs`): `names` are what
    /// was captured, and it may no longer run some of them. Such an op may run the assert's
    /// kernel whether or not `names` has it, so it never lets an assert make a verdict exact.
    pub(crate) changed: bool,
}

impl KernelList {
    /// A copy or memset: no kernel, known.
    pub(crate) fn none() -> KernelList {
        KernelList {
            names: Vec::new(),
            complete: true,
            changed: false,
        }
    }
}

/// What the report knows beyond the rings.
pub(crate) struct Clues<'a> {
    /// The kernels an op runs.
    pub(crate) kernels: &'a mut dyn FnMut(&OpRecord) -> KernelList,
    /// The function a device-side assert tied to this error names, as the driver printed it
    /// (`DeviceAssert::kernel`: `__PRETTY_FUNCTION__` or `__func__` text), matched by
    /// `DeviceAssert::printed_name_matches`.
    pub(crate) assert_kernel: Option<&'a str>,
    /// The error is a device-side assert (`CUDA_ERROR_ASSERT`, 710: "a device-side assert
    /// triggered during kernel execution", driver API `CUresult` documentation): only an op that
    /// runs a kernel can have raised it, so copies and memsets in a window are not candidates.
    pub(crate) kernels_only: bool,
    /// Whether progress markers were in use (`config::markers_enabled`): false once the driver
    /// refused one (its slots then prove nothing more; culprits are suspects). Not read from the
    /// views: a stream's only op may have faulted before its marker could be enqueued.
    pub(crate) markers_work: bool,
}

/// Judges a sticky error reported in `context` (`None`: unknown, consider every context), from
/// the rings alone (tests; the library calls [`judge_with`]).
#[cfg(test)]
pub(crate) fn judge(views: &[StreamView], context: Option<usize>) -> Verdict {
    judge_with(
        views,
        context,
        &mut Clues {
            kernels: &mut |o| match o.launch.kind {
                OpKind::Memcpy | OpKind::Memset => KernelList::none(),
                _ => KernelList::default(),
            },
            assert_kernel: None,
            kernels_only: false,
            markers_work: true,
        },
    )
}

/// Whether a demangled kernel name is a communication kernel (NCCL, RCCL-like names).
pub(crate) fn is_communication(kernel: &str) -> bool {
    let k = kernel.to_ascii_lowercase();
    k.contains("nccl") || k.contains("rccl")
}

/// One stream's window (see the module doc).
struct Window {
    stream: usize,
    /// Known window ops, in stream order: indices into the stream's `ops`.
    ops: Vec<usize>,
    /// Unknown spans, `(first seq, count)`, in stream order, with the index of the known op they
    /// come before (`ops.len()` at the time).
    unknown: Vec<(u64, u64, usize)>,
}

impl Window {
    fn size(&self) -> u64 {
        self.ops.len() as u64 + self.unknown.iter().map(|u| u.1).sum::<u64>()
    }
    fn unknown_ops(&self) -> u64 {
        self.unknown.iter().map(|u| u.1).sum()
    }
    /// Drops the copies and memsets from the window's candidates (a device-side assert: only a
    /// kernel raises it); unknown spans keep their place among the ops left.
    fn keep_kernels(&mut self, views: &[StreamView]) {
        let ops = &views[self.stream].ops;
        let kept_before = |pos: usize, list: &[usize]| {
            list[..pos]
                .iter()
                .filter(|&&j| !matches!(ops[j].launch.kind, OpKind::Memcpy | OpKind::Memset))
                .count()
        };
        for u in &mut self.unknown {
            u.2 = kept_before(u.2, &self.ops);
        }
        self.ops
            .retain(|&j| !matches!(ops[j].launch.kind, OpKind::Memcpy | OpKind::Memset));
    }
}

/// The windows of the streams of `in_scope` with unfinished work.
fn windows(views: &[StreamView], in_scope: &[usize]) -> Vec<Window> {
    in_scope
        .iter()
        .filter_map(|&i| {
            let v = &views[i];
            let done = v.completed();
            if done >= v.issued {
                return None;
            }
            let mut w = Window {
                stream: i,
                ops: Vec::new(),
                unknown: Vec::new(),
            };
            let mut next = done + 1;
            let mut closed = false;
            for (j, o) in v.ops.iter().enumerate() {
                if o.seq < next {
                    continue;
                }
                if o.seq > next {
                    w.unknown.push((next, o.seq - next, w.ops.len()));
                }
                next = o.seq + 1;
                // A synchronous copy completed before it was recorded: never a candidate.
                if o.synchronous {
                    continue;
                }
                w.ops.push(j);
                // Without a marker slot a mark proves nothing: every op after `done` counts.
                if o.marked && v.marker.is_some() {
                    closed = true;
                    break;
                }
            }
            if !closed && next <= v.issued {
                w.unknown.push((next, v.issued + 1 - next, w.ops.len()));
            }
            (w.size() > 0).then_some(w)
        })
        .collect()
}

/// Sort key of a window op, smallest first: not named by the assert, class (0 kernel, 1
/// communication kernel, 2 copy or memset), whether the same kernel completed before, the start
/// of its stream's window (latest first), its seq (stream order).
type RankKey = (bool, u8, bool, std::cmp::Reverse<u64>, u64);

/// Completed executions of `o`'s kernel handle, on any stream in view.
fn completed_runs(views: &[StreamView], o: &OpRecord) -> usize {
    if o.launch.kind != OpKind::Kernel {
        return 0;
    }
    views
        .iter()
        .map(|v| {
            let done = v.completed();
            v.ops
                .iter()
                .filter(|p| {
                    p.seq <= done
                        && !p.synchronous
                        && p.launch.kind == OpKind::Kernel
                        && p.launch.handle == o.launch.handle
                })
                .count()
        })
        .sum()
}

/// Ranks the window ops (see the module doc), returning them most likely first with their
/// evidence; `named[k]` says whether `ops[k]` runs the kernel the assert names, `started[k]` when
/// its stream's window began (launch time of its first known op, ns).
fn rank(
    views: &[StreamView],
    ops: &[OpAt],
    named: &[bool],
    started: &[u64],
    lists: &[KernelList],
) -> Vec<Ranked> {
    let now = views
        .iter()
        .flat_map(|v| v.ops.iter().map(|o| o.time_ns))
        .max()
        .unwrap_or(0);
    let mut keyed: Vec<(RankKey, Ranked)> = ops
        .iter()
        .enumerate()
        .map(|(k, &at)| {
            let o = &views[at.0].ops[at.1];
            let names = &lists[k].names;
            let (class, what) = match o.launch.kind {
                OpKind::Memcpy | OpKind::Memset => (
                    2u8,
                    "a copy or memset (no user code runs; ranked after kernels)".to_string(),
                ),
                _ if !names.is_empty() && names.iter().all(|n| is_communication(n)) => (
                    1,
                    "a communication kernel (waits on peers; ranked after other kernels)".into(),
                ),
                OpKind::Graph => (0, "a graph launch".into()),
                _ => (0, "a kernel".into()),
            };
            let ran = completed_runs(views, o);
            let history = if o.launch.kind != OpKind::Kernel {
                String::new()
            } else if ran == 0 {
                ", never completed before in the recorded ops".into()
            } else {
                let runs = if ran == 1 {
                    "once".to_string()
                } else {
                    format!("{ran} times")
                };
                format!(", the same kernel completed {runs} before (ranked after kernels that never did)")
            };
            let assert = match (named[k], lists[k].changed) {
                (true, false) => ", runs the kernel the device-side assert names (ranked first)",
                (true, true) => {
                    ", was captured running the kernel the device-side assert names and changed \
                     since (ranked first)"
                }
                (false, true) => ", a graph changed after capture (its kernel list may be out of date)",
                (false, false) => "",
            };
            let age = now.saturating_sub(o.time_ns);
            // The newest op is the last recorded launch itself (a fresh-user trial: "launched
            // 0.000 ms before the last recorded launch").
            let when = if age == 0 {
                ", the last op recorded".to_string()
            } else {
                format!(
                    ", launched {:.3} ms before the last recorded launch",
                    age as f64 / 1e6
                )
            };
            let evidence = format!("{what}{assert}{history}{when}");
            (
                (
                    !named[k],
                    class,
                    ran > 0,
                    std::cmp::Reverse(started[k]),
                    o.seq,
                ),
                Ranked {
                    stream: at.0,
                    seq: o.seq,
                    at: Some(at),
                    unknown: 0,
                    evidence,
                },
            )
        })
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, r)| r).collect()
}

/// An unknown span as a window entry.
fn unknown_entry(stream: usize, first: u64, count: u64) -> Ranked {
    let last = first + count - 1;
    let which = if count == 1 {
        format!("op #{first}")
    } else {
        format!("ops #{first}..#{last} ({count})")
    };
    Ranked {
        stream,
        seq: first,
        at: None,
        unknown: count,
        evidence: format!(
            "{which} no longer held (they fell out of the ring and the held list, or the ring was busy): \
             kernel and launch site unknown"
        ),
    }
}

/// Judges like [`judge`], with kernel names and a device-side assert's kernel as extra evidence.
pub(crate) fn judge_with(
    views: &[StreamView],
    context: Option<usize>,
    clues: &mut Clues,
) -> Verdict {
    let in_scope = scope(views, context);
    let mut windows = windows(views, &in_scope);
    if clues.kernels_only {
        for w in &mut windows {
            w.keep_kernels(views);
        }
        windows.retain(|w| w.size() > 0);
    }
    // Streams in the order their windows began (first known op's launch time).
    windows.sort_by_key(|w| w.ops.first().map_or(0, |&j| views[w.stream].ops[j].time_ns));
    let op = |at: OpAt| -> &OpRecord { &views[at.0].ops[at.1] };
    // Every known window op, in stream order, with when its stream's window began.
    let known: Vec<OpAt> = windows
        .iter()
        .flat_map(|w| w.ops.iter().map(move |&j| (w.stream, j)))
        .collect();
    let started: Vec<u64> = known
        .iter()
        .map(|&(i, _)| {
            windows
                .iter()
                .find(|w| w.stream == i)
                .and_then(|w| w.ops.first())
                .map_or(0, |&j| views[i].ops[j].time_ns)
        })
        .collect();
    let lists: Vec<KernelList> = known.iter().map(|&at| (clues.kernels)(op(at))).collect();
    let assert_kernel = clues.assert_kernel;
    let named: Vec<bool> = lists
        .iter()
        .map(|l| {
            assert_kernel.is_some_and(|k| {
                l.names
                    .iter()
                    .any(|n| cudablame_report::model::DeviceAssert::printed_name_matches(k, n))
            })
        })
        .collect();
    let total: u64 = windows.iter().map(Window::size).sum();
    let unknown: u64 = windows.iter().map(Window::unknown_ops).sum();
    // The window in stream order, unknown spans where they sit.
    let in_order: Vec<Ranked> = windows
        .iter()
        .flat_map(|w| {
            let mut out = Vec::new();
            for (k, &j) in w.ops.iter().enumerate() {
                for &(first, n, _) in w.unknown.iter().filter(|u| u.2 == k) {
                    out.push(unknown_entry(w.stream, first, n));
                }
                out.push(Ranked {
                    stream: w.stream,
                    seq: views[w.stream].ops[j].seq,
                    at: Some((w.stream, j)),
                    unknown: 0,
                    evidence: String::new(),
                });
            }
            for &(first, n, _) in w.unknown.iter().filter(|u| u.2 == w.ops.len()) {
                out.push(unknown_entry(w.stream, first, n));
            }
            out
        })
        .collect();

    if windows.is_empty() {
        return Verdict {
            confidence: Confidence::Suspect,
            culprit: None,
            reason: "every op cudablame recorded in this context had completed; the fault came from \
                     work it did not see (an unhooked entry point, or an op that fell out of the ring)"
                .into(),
            suspects: Vec::new(),
            candidates: Vec::new(),
            window: Vec::new(),
            one_of: 0,
            not_exact: Some("no recorded op was unfinished".into()),
            beyond: None,
            assert_matched: false,
        };
    }
    // Markers prove windows only while they work (`Clues::markers_work`) and on streams with a
    // marker slot.
    let all_marked = clues.markers_work && windows.iter().all(|w| views[w.stream].marker.is_some());
    let kernel = assert_kernel.unwrap_or("");
    let n_named = named.iter().filter(|&&b| b).count();
    // Window ops that may run the assert's kernel without being known to: incomplete lists, and
    // lists changed after capture (a name there may be one it no longer runs).
    let maybe_list = |l: &KernelList, n: bool| (!n && !l.complete) || l.changed;
    let maybe = known
        .iter()
        .zip(&lists)
        .zip(&named)
        .filter(|((_, l), &n)| maybe_list(l, n))
        .count() as u64
        + unknown;
    let changed = lists.iter().filter(|l| l.changed).count();

    let mut candidates = Vec::new();
    let mut window = Vec::new();
    let mut not_exact = None;
    let mut assert_matched = false;
    let mut one_of = 0;
    let (confidence, culprit, reason) = if all_marked {
        one_of = total;
        let ranked = rank(views, &known, &named, &started, &lists);
        let streams = windows.len();
        if total == 1 && unknown == 0 {
            // One op can have faulted: it did.
            let at = known[0];
            let v = &views[at.0];
            let seq = op(at).seq;
            assert_matched = named[0];
            let also = if assert_matched {
                format!("; the device-side assert the driver printed names its kernel, {kernel}")
            } else {
                String::new()
            };
            let why = if op(at).marked {
                "its own marker was enqueued behind it and never written".to_string()
            } else {
                "nothing was enqueued after it".to_string()
            };
            let reason = format!(
                "progress marker of stream {} proves ops up to #{} completed, so op #{seq} started and \
                 never completed ({why}); no other stream of the context had unfinished work{also}",
                v.id.describe(),
                v.completed()
            );
            (Confidence::Exact, Some(at), reason)
        } else if assert_kernel.is_some() && n_named == 1 && maybe == 0 {
            let k = named.iter().position(|&b| b).unwrap_or(0);
            let at = known[k];
            assert_matched = true;
            let reason = format!(
                "the driver printed a device-side assert in {kernel}, and of the {total} ops that can have \
                 faulted (the ops after the last proven one on each of {streams} stream(s), up to the first \
                 with a progress marker behind it) only op #{} on stream {} runs a kernel of that name, and \
                 every one of them has a known kernel list",
                op(at).seq,
                views[at.0].id.describe()
            );
            candidates = ranked;
            window = in_order;
            (Confidence::Exact, Some(at), reason)
        } else {
            let culprit = ranked.first().and_then(|r| r.at);
            let first = ranked
                .first()
                .map(|r| {
                    format!(
                        "; op #{} on stream {} ranks first: {}",
                        r.seq,
                        views[r.stream].id.describe(),
                        r.evidence
                    )
                })
                .unwrap_or_default();
            let unknown_note = if unknown > 0 {
                format!(
                    "; {unknown} of them are no longer held (raise CUDABLAME_RING), so no op is known to be it"
                )
            } else {
                String::new()
            };
            let reason = format!(
                "one of these {total} ops, in stream order: the progress markers prove which ops completed on \
                 each of {streams} stream(s) with unfinished work, and no marker stands between these \
                 ones{first}{unknown_note}"
            );
            let assert_note = match (assert_kernel, n_named) {
                (None, _) => String::new(),
                (Some(k), _) if maybe > 0 => format!(
                    "; the device-side assert names {k}, which {n_named} known op(s) run and {maybe} op(s) of \
                     unknown or cut kernel lists may run{}",
                    match changed {
                        0 => String::new(),
                        n => format!(
                            " ({n} of them a graph changed after capture, whose captured kernel list may \
                             be out of date)"
                        ),
                    }
                ),
                (Some(k), 0) => {
                    format!("; the device-side assert names {k}, which no window op runs")
                }
                (Some(k), n) => {
                    format!("; the device-side assert names {k}, which {n} window ops run")
                }
            };
            let markers = if streams > 1 {
                format!("{streams} streams had unfinished work and a fault stops all of them: ")
            } else {
                String::new()
            };
            not_exact = Some(format!(
                "{markers}{total} ops can have faulted and no progress marker stands between them{assert_note}"
            ));
            candidates = ranked;
            window = in_order;
            (Confidence::Likely, culprit, reason)
        }
    } else {
        // No markers: the one unfinished kernel the assert names, else the most recent kernel.
        not_exact = Some(
            "no progress markers: any op issued since the last successful synchronization may have faulted"
                .into(),
        );
        let named_ops: Vec<OpAt> = known
            .iter()
            .zip(&named)
            .filter(|(_, &n)| n)
            .map(|(&at, _)| at)
            .collect();
        if named_ops.len() == 1 {
            assert_matched = true;
            let reason = format!(
                "no progress markers (CUDABLAME_MARKERS=off, or the driver refused them); the device-side \
                 assert the driver printed names {kernel}, and only this one of the {} unfinished ops runs it",
                total
            );
            (Confidence::Likely, Some(named_ops[0]), reason)
        } else {
            let latest = known
                .iter()
                .copied()
                .filter(|&at| op(at).launch.kind == OpKind::Kernel)
                .max_by_key(|&at| op(at).time_ns)
                .or_else(|| known.iter().copied().max_by_key(|&at| op(at).time_ns));
            let reason = format!(
                "no progress markers (CUDABLAME_MARKERS=off, or the driver refused them): {total} ops had been \
                 issued since the last successful synchronization; this is the most recent kernel among them"
            );
            (Confidence::Suspect, latest, reason)
        }
    };

    // Every unfinished known op after the window too (what had not completed), for `suspects`.
    let unfinished: Vec<OpAt> = windows
        .iter()
        .flat_map(|w| {
            let v = &views[w.stream];
            let done = v.completed();
            v.ops
                .iter()
                .enumerate()
                .filter(move |(_, o)| o.seq > done && !o.synchronous)
                .map(move |(j, _)| (w.stream, j))
        })
        .collect();
    let mut suspects: Vec<OpAt> = unfinished
        .into_iter()
        .filter(|&at| Some(at) != culprit)
        .collect();
    // Window ops first (in candidate rank), then the rest by launch time.
    suspects.sort_by_key(|&at| {
        let rank = candidates
            .iter()
            .position(|r| r.at == Some(at))
            .or_else(|| {
                known
                    .iter()
                    .position(|&k| k == at)
                    .map(|p| p + candidates.len())
            })
            .unwrap_or(usize::MAX);
        (rank, op(at).time_ns)
    });
    suspects.truncate(MAX_SUSPECTS);
    Verdict {
        confidence,
        culprit,
        reason,
        suspects,
        candidates,
        window,
        one_of,
        not_exact,
        beyond: None,
        assert_matched,
    }
}

/// When the first unfinished op of `context`'s streams was launched (wall-clock ns): a
/// device-side assert printed before it belongs to another error. `None` when nothing recorded
/// was unfinished, or when a stream's first unfinished op is no longer held (its launch time is
/// unknown).
pub(crate) fn unfinished_since(views: &[StreamView], context: Option<usize>) -> Option<u64> {
    let mut first = None::<u64>;
    for i in scope(views, context) {
        let v = &views[i];
        let done = v.completed();
        if done >= v.issued {
            continue;
        }
        let next = v.ops.iter().find(|o| o.seq > done)?;
        if next.seq != done + 1 {
            return None;
        }
        if let Some(o) = v.ops.iter().find(|o| o.seq > done && !o.synchronous) {
            first = Some(first.map_or(o.time_ns, |f| f.min(o.time_ns)));
        }
    }
    first
}

/// What an error code itself says about its cause, when it does not imply that the op running
/// when it surfaced faulted (CUDA driver API, `CUresult`): `None` for codes that do (700, 710,
/// 716, ...).
pub(crate) fn code_caveat(code: u32) -> Option<&'static str> {
    match code {
        702 => Some(
            "CUDA_ERROR_LAUNCH_TIMEOUT (702) means the driver's watchdog stopped a kernel that ran longer \
             than the display timeout allows: the code does not imply that the running op faulted (the GPU's \
             time may have gone to other work, another process or the display)",
        ),
        999 => Some(
            "CUDA_ERROR_UNKNOWN (999) says nothing about its cause (the driver also returns it for failures \
             outside the program: a GPU that fell off the bus, an Xid error, a reset): the code does not imply \
             that the running op faulted",
        ),
        _ => None,
    }
}

/// Keeps a verdict below `exact` when the error's code (`code_caveat`) or the process's setting
/// does not imply that the running op faulted: `mps` is set when this process is an MPS client,
/// where a fatal exception of any client sharing the GPU is reported to all of them without
/// saying which (NVIDIA MPS documentation, "Error Containment"). The reason and `not_exact` say so.
pub(crate) fn cap_for_code(verdict: &mut Verdict, code: u32, mps: bool) {
    let mut why: Vec<&str> = code_caveat(code).into_iter().collect();
    if mps {
        why.push(
            "this process is an MPS client, and MPS reports a fatal GPU exception of any client sharing the \
             GPU to all of them without saying which: the code does not imply that this process's running \
             op faulted",
        );
    }
    if why.is_empty() {
        return;
    }
    if verdict.confidence == Confidence::Exact {
        verdict.confidence = Confidence::Likely;
    }
    let why = why.join("; ");
    verdict.reason = format!("{}; not exact: {why}", verdict.reason);
    verdict.not_exact = Some(match verdict.not_exact.take() {
        Some(n) => format!("{why}; {n}"),
        None => why,
    });
}

/// The views a verdict on `context` looks at: every stream of the reporting context's DEVICE
/// (its own and its device's other contexts'), or every stream when the context is unknown or
/// has none. A fault stops the whole device, not one context: measured on the H200 (driver
/// 580.159.04, `cuda-samples/cross_context.c`), a store to an illegal address by a kernel of
/// context A makes `cuMemAlloc` and `cuCtxSynchronize` with context B of the same device current
/// return 700 while B's own kernel was healthy and still running. Streams whose device is
/// unknown (-1) are always in scope, and all are when the reporting context's device is unknown;
/// streams of other devices never are (their contexts keep working: `two_contexts.cu`).
pub(crate) fn scope(views: &[StreamView], context: Option<usize>) -> Vec<usize> {
    match scope_device(views, context) {
        Some(d) => (0..views.len())
            .filter(|&i| views[i].device == d || views[i].device < 0)
            .collect(),
        None => (0..views.len()).collect(),
    }
}

/// The device [`scope`] looks at: the reporting context's, `None` when it is unknown (then
/// every device's work is judged).
pub(crate) fn scope_device(views: &[StreamView], context: Option<usize>) -> Option<i32> {
    context
        .and_then(|c| views.iter().find(|v| v.context == c).map(|v| v.device))
        .filter(|&d| d >= 0)
}

/// Caps a verdict below `exact` when work cudablame never saw may hide the culprit, and says why
/// in its reason: work enqueued by an entry point it does not record (`cuLaunchHostFunc`, ...)
/// that may not have completed, a stream whose ring it could not read (busy), or destroyed
/// streams of any context of the device (`None` scope: of any) dropped from the retired list
/// with work possibly unfinished (`dropped_unfinished`), contexts of the device destroyed while
/// work of theirs may not have completed (`destroyed_contexts`: their streams are forgotten, and
/// a fault of that work stops the device), or `paused`: cudablame was paused at some point of this process
/// (`cudablame_pause`, a benchmark switch), and whatever the program enqueued meanwhile, on any
/// stream, is in no ring.
pub(crate) fn cap_for_unseen_work(
    verdict: &mut Verdict,
    views: &[StreamView],
    context: Option<usize>,
    dropped_unfinished: u64,
    destroyed_contexts: u64,
    paused: bool,
) {
    let mut why: Vec<String> = Vec::new();
    if paused {
        why.push(
            "cudablame was paused in this process (cudablame_pause), and the work enqueued while it \
             was is unrecorded"
                .to_string(),
        );
    }
    for i in scope(views, context) {
        let v = &views[i];
        if v.unseen_after > v.completed() {
            why.push(format!(
                "{} enqueued work cudablame does not record on stream {} after op #{}",
                v.unseen_what.unwrap_or("an unrecorded entry point"),
                v.id.describe(),
                v.unseen_after - 1
            ));
        }
        if v.busy && v.issued > v.completed() {
            why.push(format!(
                "stream {} was busy (its ring was locked) and was not read",
                v.id.describe()
            ));
        }
    }
    if dropped_unfinished > 0 {
        why.push(format!(
            "{dropped_unfinished} destroyed stream(s) of the device's contexts with possibly unfinished work \
             are no longer kept"
        ));
    }
    if destroyed_contexts > 0 {
        why.push(format!(
            "{destroyed_contexts} context(s) of the device were destroyed while their work may \
             not have completed, and their ops are no longer kept (a fault of that work stops \
             the device)"
        ));
    }
    if why.is_empty() {
        return;
    }
    if verdict.confidence == Confidence::Exact {
        verdict.confidence = Confidence::Likely;
    }
    let why = why.join("; ");
    verdict.reason = format!("{}; not exact: {why}", verdict.reason);
    verdict.not_exact.get_or_insert(why.clone());
    verdict.beyond = Some(why);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::StreamId;

    fn op(seq: u64, kind: OpKind, time_ns: u64) -> OpRecord {
        OpRecord::for_test(seq, kind, time_ns)
    }

    fn stream(
        id: usize,
        ctx: usize,
        n: u64,
        marker: Option<u64>,
        host: u64,
        t0: u64,
    ) -> StreamView {
        StreamView {
            id: StreamId::Handle(id),
            context: ctx,
            device: 0,
            issued: n,
            marker,
            host_completed: host,
            ops: (1..=n)
                .map(|s| op(s, OpKind::Kernel, t0 + s * 10))
                .collect(),
            busy: false,
            unseen_after: 0,
            unseen_what: None,
        }
    }

    #[test]
    fn unseen_work_caps_the_verdict_below_exact() {
        // A host function went onto the stream after #19 (unseen_after 20): #20 may not be it.
        let mut views = vec![stream(0x10, 1, 40, Some(19), 0, 0)];
        views[0].unseen_after = 20;
        views[0].unseen_what = Some("cuLaunchHostFunc");
        let mut v = judge(&views, Some(1));
        cap_for_unseen_work(&mut v, &views, Some(1), 0, 0, false);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.reason.contains("cuLaunchHostFunc"), "{}", v.reason);
        // Unseen work that a later marker proves complete changes nothing.
        views[0].unseen_after = 5;
        let mut v = judge(&views, Some(1));
        cap_for_unseen_work(&mut v, &views, Some(1), 0, 0, false);
        assert_eq!(v.confidence, Confidence::Exact);
        // Dropped destroyed streams with unfinished work, and busy rings, cap it too.
        cap_for_unseen_work(&mut v, &views, Some(1), 2, 0, false);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.reason.contains("2 destroyed stream"), "{}", v.reason);
        // A context of the device destroyed with unproven work caps it too.
        let mut v = judge(&views, Some(1));
        cap_for_unseen_work(&mut v, &views, Some(1), 0, 1, false);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(
            v.reason.contains("1 context(s) of the device"),
            "{}",
            v.reason
        );
        let mut busy = vec![
            stream(0x10, 1, 4, Some(1), 0, 0),
            stream(0x20, 1, 9, Some(3), 0, 0),
        ];
        busy[1].busy = true;
        busy[1].ops.clear();
        let mut v = judge(&busy[..1], Some(1));
        cap_for_unseen_work(&mut v, &busy, Some(1), 0, 0, false);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.reason.contains("busy"), "{}", v.reason);
        // A process that was paused (cudablame_pause) has unrecorded work anywhere.
        let mut v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Exact);
        cap_for_unseen_work(&mut v, &views, Some(1), 0, 0, true);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.reason.contains("cudablame was paused"), "{}", v.reason);
    }

    #[test]
    fn a_verdict_looks_at_the_reporting_device_only() {
        // Context 1 (device 0): a fault on 0x10 (#2). Context 2 on device 1, current on the
        // reporting thread: a slow kernel still running. Blaming context 1 (the stream that
        // reported) names #2 of 0x10: another device's work cannot have faulted this one.
        let mut views = vec![
            stream(0x10, 1, 3, Some(1), 0, 0),
            stream(0x20, 2, 1, Some(0), 0, 1000),
        ];
        views[1].device = 1;
        let v = judge(&views, Some(1));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((0, 1))));
        assert!(v.suspects.iter().all(|&(i, _)| i == 0));
    }

    #[test]
    fn a_device_side_assert_is_never_a_copys() {
        // #1 proven; #2 a copy and #3 a graph launch without markers: one window of 2 (as
        // cuda_graph_oob.py on the H200: the copy of the bad index, then the graph replay).
        let mut views = vec![stream(0x10, 1, 3, Some(1), 0, 0)];
        views[0].ops[1].launch.kind = OpKind::Memcpy;
        views[0].ops[2].launch.kind = OpKind::Graph;
        for o in &mut views[0].ops[1..] {
            o.marked = false;
        }
        let judged = |kernels_only| {
            judge_with(
                &views,
                Some(1),
                &mut Clues {
                    kernels: &mut |o| match o.launch.kind {
                        OpKind::Memcpy | OpKind::Memset => KernelList::none(),
                        _ => KernelList::default(),
                    },
                    assert_kernel: None,
                    kernels_only,
                    markers_work: true,
                },
            )
        };
        // Any other error: the copy may have faulted too.
        let v = judged(false);
        assert_eq!((v.confidence, v.one_of), (Confidence::Likely, 2));
        // 710: only the graph runs kernels.
        let v = judged(true);
        assert_eq!(v.confidence, Confidence::Exact);
        assert_eq!(views[0].ops[v.culprit.unwrap().1].seq, 3);
    }

    #[test]
    fn one_stream_with_marker_is_exact() {
        let views = vec![stream(0x10, 1, 40, Some(19), 0, 0)];
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Exact);
        assert_eq!(views[0].ops[v.culprit.unwrap().1].seq, 20);
        assert_eq!(v.suspects.len(), MAX_SUSPECTS); // #21..#40, capped
        assert!(v.reason.contains("up to #19 completed"), "{}", v.reason);
    }

    #[test]
    fn finished_streams_and_other_devices_do_not_count() {
        let mut views = vec![
            stream(0x10, 1, 5, Some(5), 0, 0),   // all done
            stream(0x20, 1, 8, Some(3), 0, 100), // #4 faulted
            stream(0x30, 2, 9, Some(1), 0, 0),   // other device's context, unfinished
        ];
        views[2].device = 1;
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Exact);
        assert_eq!(v.culprit, Some((1, 3)));
        assert!(v.suspects.iter().all(|&(i, _)| i == 1));
    }

    #[test]
    fn another_context_of_the_same_device_is_judged_too() {
        // cross_context.c on the H200: context 2's kernel (0x20 #1) spins, context 1's (0x10
        // #2) stores to an illegal address; a call in context 2 returns 700. Both contexts are
        // on device 0, so both unfinished ops are candidates: never `exact` on context 2's.
        let views = vec![
            stream(0x10, 1, 2, Some(1), 0, 1000),
            stream(0x20, 2, 1, Some(0), 0, 0),
        ];
        for reporting in [1, 2] {
            let v = judge(&views, Some(reporting));
            assert_eq!(v.confidence, Confidence::Likely, "context {reporting}");
            assert_eq!(v.one_of, 2, "context {reporting}");
            let mut window: Vec<(usize, u64)> =
                v.window.iter().map(|r| (r.stream, r.seq)).collect();
            window.sort();
            assert_eq!(window, vec![(0, 2), (1, 1)], "context {reporting}");
        }
        // A stream of unknown device (-1) is in every device's scope.
        let mut unknown = views.clone();
        unknown[1].device = -1;
        unknown[0].device = 3;
        assert_eq!(judge(&unknown, Some(1)).one_of, 2);
    }

    #[test]
    fn host_synchronization_counts_as_completion() {
        // The marker lags (write not yet visible) but a successful sync proved #6 complete.
        let views = vec![stream(0x10, 1, 9, Some(2), 6, 0)];
        let v = judge(&views, Some(1));
        assert_eq!(views[0].ops[v.culprit.unwrap().1].seq, 7);
    }

    #[test]
    fn two_unfinished_streams_are_likely_most_recent_first() {
        // 0x10 is busy with long kernels launched early; 0x20's #4 was launched last.
        let views = vec![
            stream(0x10, 1, 4, Some(1), 0, 0),
            stream(0x20, 1, 4, Some(3), 0, 1000),
        ];
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Likely);
        assert_eq!(v.culprit, Some((1, 3))); // #4 on 0x20, launched at t=1040
        assert_eq!(v.suspects[0], (0, 1)); // the other stream's first unfinished op comes next
    }

    #[test]
    fn without_markers_the_latest_kernel_is_a_suspect() {
        let mut views = vec![stream(0x10, 1, 6, None, 2, 0)];
        views[0].ops[5].launch.kind = OpKind::Memcpy; // #6 is a copy
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Suspect);
        assert_eq!(views[0].ops[v.culprit.unwrap().1].seq, 5);
        assert_eq!(v.suspects.len(), 3);
    }

    #[test]
    fn ops_no_longer_held_are_never_skipped() {
        // The ring kept #201..#300 and the marker proves #10: #11..#200 are unknown, and may be
        // the culprit whatever the ring holds.
        let mut views = vec![stream(0x10, 1, 300, Some(10), 0, 0)];
        views[0].ops.drain(..200);
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Likely);
        assert_eq!(v.one_of, 191);
        assert_eq!((v.window[0].seq, v.window[0].unknown), (11, 190));
        assert_eq!(v.window[1].seq, 201);
        assert!(
            v.reason.contains("190 of them are no longer held"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn a_gap_left_by_the_held_list_is_never_exact() {
        // Issue 19.5: one slow op, 9,999 queued behind it; the held list kept #2..#4097, the
        // ring #9745..#10000; #6001 faulted (marker 6000). Old verdict: `fill (op #9745, exact)`.
        let mut views = vec![stream(0x10, 1, 10_000, Some(6000), 0, 0)];
        views[0]
            .ops
            .retain(|o| (2..=4097).contains(&o.seq) || o.seq >= 9745);
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Likely);
        assert_eq!(v.one_of, 3745);
        assert_eq!((v.window[0].seq, v.window[0].unknown), (6001, 3744));
        assert!(v.window[0].evidence.contains("ops #6001..#9744 (3744)"));
        assert!(!v.reason.contains("so op #9745 started"), "{}", v.reason);
        // An assert naming the one known op cannot make it exact either: unknown ops may run it.
        let v = judge_named(&views, &[(9745, "fill(int*)")], Some("fill"));
        assert_eq!(v.confidence, Confidence::Likely);
    }

    #[test]
    fn sparse_markers_give_a_window_in_stream_order() {
        // Markers behind #1, #5 and #10 only; the marker proves #1: #2..#5 can have faulted.
        let mut views = vec![stream(0x10, 1, 10, Some(1), 0, 0)];
        for o in &mut views[0].ops {
            o.marked = [1, 5, 10].contains(&o.seq);
        }
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Likely);
        assert_eq!(v.one_of, 4);
        let seqs: Vec<u64> = v.window.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![2, 3, 4, 5]);
        // No evidence ranks one above another: stream order, the first one first.
        assert_eq!(v.culprit, Some((0, 1)));
        assert!(
            v.reason.starts_with("one of these 4 ops, in stream order"),
            "{}",
            v.reason
        );
        assert!(v.not_exact.is_some());
        // A window of one, ended by its own marker: exact.
        views[0].marker = Some(5);
        views[0].ops[5].marked = true; // #6
        let v = judge(&views, Some(1));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((0, 5))));
        assert!(v.window.is_empty());
        // The last issued op, unmarked, is a window of one too.
        views[0].marker = Some(9);
        let v = judge(&views, Some(1));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((0, 9))));
        assert!(
            v.reason.contains("nothing was enqueued after it")
                || v.reason.contains("marker was enqueued")
        );
    }

    #[test]
    fn an_assert_picks_one_of_a_window_only_when_every_kernel_list_is_known() {
        // One stream, window #2..#4: fill, check_kernel, fill. The assert names check_kernel.
        let mut views = vec![stream(0x10, 1, 4, Some(1), 0, 0)];
        for o in &mut views[0].ops {
            o.marked = o.seq == 1 || o.seq == 4;
            o.launch.handle = if o.seq == 3 { 100 } else { 200 };
        }
        let names = [(100, "check_kernel(int*, int)"), (200, "fill(int*)")];
        let v = judge_named(&views, &names, Some("check_kernel"));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((0, 2))));
        assert!(v.assert_matched);
        // A graph launch whose kernel list is unknown (or cut) may run check_kernel too.
        views[0].ops[1].launch.kind = OpKind::Graph;
        views[0].ops[1].launch.handle = 999; // no names: not complete
        let v = judge_named(&views, &names, Some("check_kernel"));
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(
            v.not_exact
                .as_deref()
                .unwrap()
                .contains("unknown or cut kernel lists"),
            "{:?}",
            v.not_exact
        );
        // Ranked first all the same, with the evidence said.
        assert_eq!(v.culprit, Some((0, 2)));
        assert!(v.candidates[0]
            .evidence
            .contains("device-side assert names"));
    }

    #[test]
    fn codes_the_program_did_not_cause_are_never_exact() {
        let views = vec![stream(0x10, 1, 40, Some(19), 0, 0)];
        for code in [702, 999] {
            let mut v = judge(&views, Some(1));
            cap_for_code(&mut v, code, false);
            assert_eq!(v.confidence, Confidence::Likely, "{code}");
            assert_eq!(views[0].ops[v.culprit.unwrap().1].seq, 20);
            assert!(v
                .not_exact
                .as_deref()
                .unwrap()
                .contains("does not imply that the running op faulted"));
        }
        let mut v = judge(&views, Some(1));
        cap_for_code(&mut v, 700, true);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.reason.contains("MPS client"), "{}", v.reason);
        let mut v = judge(&views, Some(1));
        cap_for_code(&mut v, 700, false);
        assert_eq!(v.confidence, Confidence::Exact);
    }

    #[test]
    fn synchronous_copies_are_never_candidates() {
        // #5 is a synchronous copy recorded after the marker's last write (#4): nothing pending.
        let mut views = vec![stream(0x10, 1, 5, Some(4), 0, 0)];
        views[0].ops[4].synchronous = true;
        assert_eq!(judge(&views, Some(1)).culprit, None);
        // With #6 launched after it and faulting, #6 is the culprit, not #5.
        views[0].ops.push(op(6, OpKind::Kernel, 100));
        views[0].issued = 6;
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Exact);
        assert_eq!(views[0].ops[v.culprit.unwrap().1].seq, 6);
    }

    #[test]
    fn an_unmarked_candidate_is_not_proof_unless_last() {
        // #3's marker write failed: a marker reading 2 means #3 or #4 faulted.
        let mut views = vec![stream(0x10, 1, 4, Some(2), 0, 0)];
        views[0].ops[2].marked = false;
        let v = judge(&views, Some(1));
        assert_eq!((v.confidence, v.one_of), (Confidence::Likely, 2));
        // The context died between the launch of #4 and its marker: #4 is still proven.
        let mut views = vec![stream(0x10, 1, 4, Some(3), 0, 0)];
        views[0].ops[3].marked = false;
        let v = judge(&views, Some(1));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((0, 3))));
    }

    #[test]
    fn nothing_unfinished_names_no_culprit() {
        let views = vec![stream(0x10, 1, 3, Some(3), 0, 0)];
        let v = judge(&views, Some(1));
        assert_eq!(v.culprit, None);
        assert_eq!(v.confidence, Confidence::Suspect);
    }

    #[test]
    fn unknown_context_considers_all() {
        let views = vec![stream(0x10, 5, 3, Some(1), 0, 0)];
        assert_eq!(judge(&views, Some(9)).culprit, Some((0, 1)));
        assert_eq!(judge(&views, None).culprit, Some((0, 1)));
    }

    /// Names by handle for the tests: `names[handle]`.
    fn judge_named(
        views: &[StreamView],
        names: &[(usize, &str)],
        assert_kernel: Option<&str>,
    ) -> Verdict {
        let mut kernels = |o: &OpRecord| -> KernelList {
            if matches!(o.launch.kind, OpKind::Memcpy | OpKind::Memset) {
                return KernelList::none();
            }
            let names: Vec<String> = names
                .iter()
                .filter(|(h, _)| *h == o.launch.handle)
                .map(|(_, n)| n.to_string())
                .collect();
            KernelList {
                complete: !names.is_empty(),
                names,
                changed: false,
            }
        };
        judge_with(
            views,
            Some(1),
            &mut Clues {
                kernels: &mut kernels,
                assert_kernel,
                kernels_only: assert_kernel.is_some(),
                markers_work: true,
            },
        )
    }

    /// A stream whose ops all run kernel `handle` (one op per 10 ns from t0).
    fn stream_of(id: usize, n: u64, marker: u64, t0: u64, handle: usize) -> StreamView {
        let mut v = stream(id, 1, n, Some(marker), 0, t0);
        for o in &mut v.ops {
            o.launch.handle = handle;
        }
        v
    }

    #[test]
    fn an_assert_naming_one_candidate_is_exact() {
        // 0x10's #2 (handle 100, launched first) asserts; 0x20's spin (handle 200) was launched
        // last and would rank first by recency.
        let views = vec![
            stream_of(0x10, 3, 1, 0, 100),
            stream_of(0x20, 3, 0, 1000, 200),
        ];
        let names = [
            (100, "void ns::check_kernel<float>(float*, int)"),
            (200, "spin(int)"),
        ];
        let v = judge_named(&views, &names, None);
        assert_eq!(
            (v.confidence, v.culprit),
            (Confidence::Likely, Some((1, 0)))
        );
        let v = judge_named(&views, &names, Some("check_kernel"));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((0, 1))));
        assert!(v.assert_matched && v.not_exact.is_none());
        assert!(v.reason.contains("device-side assert"), "{}", v.reason);
        assert_eq!(v.candidates.len(), 2);
        assert_eq!(v.candidates[0].at, Some((0, 1)));
        assert_eq!(v.suspects[0], (1, 0)); // the other candidate comes first among suspects
    }

    #[test]
    fn an_assert_inside_a_graph_launch_is_exact() {
        let mut views = vec![
            stream_of(0x10, 2, 1, 0, 300),
            stream_of(0x20, 2, 0, 1000, 200),
        ];
        views[0].ops[1].launch.kind = OpKind::Graph;
        // A graph op's names are the kernels it runs.
        let names = [
            (300, "fill(int*)"),
            (300, "gather_kernel(int*)"),
            (200, "spin(int)"),
        ];
        let v = judge_named(&views, &names, Some("gather_kernel"));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((0, 1))));
    }

    #[test]
    fn a_graph_changed_after_capture_never_lets_an_assert_be_exact() {
        // 0x10's graph launch (handle 300) was captured running [fill] and changed since; 0x20
        // runs a healthy check_kernel (handle 200). The assert names check_kernel: the graph may
        // run it now, so no op is known to be the only one. Named or not in the captured list.
        let mut views = vec![
            stream_of(0x10, 2, 1, 0, 300),
            stream_of(0x20, 2, 1, 1000, 200),
        ];
        views[0].ops[1].launch.kind = OpKind::Graph;
        for captured in ["fill(int*)", "check_kernel(int*)"] {
            let mut kernels = |o: &OpRecord| -> KernelList {
                let graph = o.launch.handle == 300;
                KernelList {
                    names: vec![if graph {
                        captured
                    } else {
                        "check_kernel(int*)"
                    }
                    .into()],
                    complete: !graph,
                    changed: graph,
                }
            };
            let v = judge_with(
                &views,
                Some(1),
                &mut Clues {
                    kernels: &mut kernels,
                    assert_kernel: Some("check_kernel"),
                    kernels_only: true,
                    markers_work: true,
                },
            );
            assert_eq!(v.confidence, Confidence::Likely, "{captured}: {}", v.reason);
            let not_exact = v.not_exact.unwrap();
            assert!(
                not_exact.contains("1 of them a graph changed after capture"),
                "{not_exact}"
            );
        }
        // Unchanged, the same captured list [fill] made the healthy kernel exact.
        let names = [(300, "fill(int*)"), (200, "check_kernel(int*)")];
        let v = judge_named(&views, &names, Some("check_kernel"));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((1, 1))));
    }

    #[test]
    fn an_assert_naming_several_or_no_candidates_stays_likely() {
        let views = vec![
            stream_of(0x10, 2, 1, 0, 100),
            stream_of(0x20, 2, 1, 1000, 100),
        ];
        let names = [(100, "check_kernel(int*)")];
        let v = judge_named(&views, &names, Some("check_kernel"));
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.not_exact.unwrap().contains("which 2 window ops run"));
        let v = judge_named(&views, &names, Some("other_kernel"));
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.not_exact.unwrap().contains("which no window op runs"));
        // A bare-name match only: `check_kernel` is not `check_kernel2`.
        let names = [(100, "check_kernel2(int*)")];
        let v = judge_named(&views, &names, Some("check_kernel"));
        assert!(!v.assert_matched);
    }

    #[test]
    fn without_markers_an_assert_picks_its_kernel() {
        let mut views = vec![stream(0x10, 1, 6, None, 2, 0)];
        views[0].ops[3].launch.handle = 100; // #4
        let names = [(100, "check_kernel(int*)")];
        let v = judge_named(&views, &names, Some("check_kernel"));
        assert_eq!(
            (v.confidence, v.culprit),
            (Confidence::Likely, Some((0, 3)))
        );
        assert!(v.not_exact.is_some());
    }

    #[test]
    fn communication_kernels_copies_and_memsets_rank_last() {
        // Launch order: kernel on 0x10, then nccl on 0x20, then a copy on 0x30 (most recent).
        let mut views = vec![
            stream_of(0x10, 2, 1, 0, 100),
            stream_of(0x20, 2, 1, 100, 200),
            stream_of(0x30, 2, 1, 200, 300),
        ];
        views[2].ops[1].launch.kind = OpKind::Memcpy;
        let names = [
            (100, "void gather_kernel<float>(float*)"),
            (200, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"),
        ];
        let v = judge_named(&views, &names, None);
        assert_eq!(v.confidence, Confidence::Likely);
        let order: Vec<usize> = v.candidates.iter().map(|r| r.stream).collect();
        assert_eq!(order, vec![0, 1, 2]);
        assert_eq!(v.culprit, Some((0, 1)));
        assert!(v.candidates[1].evidence.contains("communication kernel"));
        assert!(v.candidates[2].evidence.contains("copy or memset"));
        assert!(v.reason.contains("ranks first"), "{}", v.reason);
        // The newest op is the last recorded launch itself, the others are dated from it (a
        // fresh-user trial: "launched 0.000 ms before the last recorded launch").
        assert!(
            v.candidates[2].evidence.ends_with(", the last op recorded"),
            "{}",
            v.candidates[2].evidence
        );
        assert!(
            v.candidates[0]
                .evidence
                .contains("ms before the last recorded launch"),
            "{}",
            v.candidates[0].evidence
        );
    }

    #[test]
    fn a_kernel_that_completed_before_ranks_after_one_that_never_did() {
        // 0x10: spin ran 3 times, the 4th is running (launched last). 0x20: a new kernel's first
        // launch, earlier.
        let views = vec![
            stream_of(0x10, 4, 3, 1000, 200),
            stream_of(0x20, 1, 0, 0, 100),
        ];
        let names = [(100, "oob_kernel(int*)"), (200, "spin(int)")];
        let v = judge_named(&views, &names, None);
        assert_eq!(v.culprit, Some((1, 0)));
        assert!(v.candidates[1]
            .evidence
            .contains("completed 3 times before"));
        assert!(v.candidates[0].evidence.contains("never completed before"));
        // Same history: the most recently launched first.
        let views = vec![
            stream_of(0x10, 1, 0, 1000, 200),
            stream_of(0x20, 1, 0, 0, 100),
        ];
        assert_eq!(judge_named(&views, &names, None).culprit, Some((0, 0)));
    }
}
