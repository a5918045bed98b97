//! From the recorded streams and an error to a verdict: which op faulted, how sure we are, and
//! which other ops had not completed. Pure logic over [`StreamView`]s, unit-tested without FFI.
//!
//! Rule: on each stream, ops up to `completed` (the progress marker's value, or what a successful
//! synchronization proved) finished; the op right after is that stream's candidate, the first that
//! never finished. Only the context that reported the error is considered (a sticky error is
//! per context). One candidate with markers on its stream: `exact`. A device-side assert names
//! its kernel (the driver prints it, `real::printf`): when exactly one candidate runs a kernel of
//! that name, it is `exact` too. Otherwise several streams with unfinished work, all with
//! markers: `likely`, candidates ranked by evidence that can be stated ([`rank`]): kernels before
//! communication kernels (`nccl*`, which wait on peers), copies and memsets (no user code runs);
//! then a kernel that never completed before in the recorded ops before one that did; then the
//! most recently launched first. Without markers: `suspect`, the most recent kernel among the
//! unfinished ops (or the one kernel the assert names).

use crate::record::{OpKind, OpRecord, StreamView};

pub(crate) use cudablame_report::model::Confidence;

/// Where an op sits in the views: `(stream index, op index in that stream's ring)`.
pub(crate) type OpAt = (usize, usize);

/// One stream's first unfinished op, with the evidence for its rank.
#[derive(Debug, PartialEq, Clone)]
pub(crate) struct Ranked {
    /// Stream index in the views.
    pub(crate) stream: usize,
    pub(crate) seq: u64,
    /// `None` when the op fell out of its ring.
    pub(crate) at: Option<OpAt>,
    pub(crate) evidence: String,
}

/// The verdict.
#[derive(Debug, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) confidence: Confidence,
    /// The culprit op, if it is still in its ring.
    pub(crate) culprit: Option<OpAt>,
    /// Why, in one sentence, with the numbers that prove it.
    pub(crate) reason: String,
    /// The other unfinished ops, most likely first.
    pub(crate) suspects: Vec<OpAt>,
    /// Each stream's first unfinished op, most likely first (only with markers and several).
    pub(crate) candidates: Vec<Ranked>,
    /// Why the verdict is not exact, in one line (`None` when it is).
    pub(crate) not_exact: Option<String>,
    /// A device-side assert's kernel matched the culprit's kernel.
    pub(crate) assert_matched: bool,
}

/// Suspects listed at most.
pub(crate) const MAX_SUSPECTS: usize = 16;

/// What the report knows beyond the rings.
pub(crate) struct Clues<'a> {
    /// Demangled names of the kernels an op runs: its kernel, or a graph launch's captured
    /// kernels; empty for copies, memsets and unknown handles.
    pub(crate) kernels: &'a mut dyn FnMut(&OpRecord) -> Vec<String>,
    /// The kernel a device-side assert named, as a bare function name
    /// (`DeviceAssert::kernel_base_name` of the report crate).
    pub(crate) assert_kernel: Option<&'a str>,
}

/// Judges a sticky error reported in `context` (`None`: unknown, consider every context), from
/// the rings alone (tests; the library calls [`judge_with`]).
#[cfg(test)]
pub(crate) fn judge(views: &[StreamView], context: Option<usize>) -> Verdict {
    judge_with(
        views,
        context,
        &mut Clues {
            kernels: &mut |_| Vec::new(),
            assert_kernel: None,
        },
    )
}

/// Whether a demangled kernel name is a communication kernel (NCCL, RCCL-like names).
pub(crate) fn is_communication(kernel: &str) -> bool {
    let k = kernel.to_ascii_lowercase();
    k.contains("nccl") || k.contains("rccl")
}

/// Sort key of a candidate, smallest first: class (0 kernel, 1 communication kernel, 2 copy or
/// memset), whether the same kernel completed before, launch time (most recent first).
type RankKey = (u8, bool, std::cmp::Reverse<u64>);

/// Ranks the candidates `(stream, seq)` (see the module doc), returning them most likely first
/// with their evidence.
pub(crate) fn rank(
    views: &[StreamView],
    firsts: &[(usize, u64)],
    clues: &mut Clues,
) -> Vec<Ranked> {
    let find = |i: usize, seq: u64| {
        views[i]
            .ops
            .iter()
            .position(|o| o.seq == seq)
            .map(|j| (i, j))
    };
    let now = views
        .iter()
        .flat_map(|v| v.ops.iter().map(|o| o.time_ns))
        .max()
        .unwrap_or(0);
    let mut keyed: Vec<(RankKey, Ranked)> = firsts
        .iter()
        .map(|&(i, seq)| {
            let at = find(i, seq);
            let Some(at) = at else {
                let r = Ranked {
                    stream: i,
                    seq,
                    at,
                    evidence: "no longer in the ring (launch time and kernel unknown)".into(),
                };
                return ((0, false, std::cmp::Reverse(0)), r);
            };
            let o = &views[at.0].ops[at.1];
            let names = (clues.kernels)(o);
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
            // Completed executions of the same kernel handle, on any stream in view.
            let ran = if o.launch.kind == OpKind::Kernel {
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
                    .sum::<usize>()
            } else {
                0
            };
            let history = if o.launch.kind != OpKind::Kernel {
                String::new()
            } else if ran == 0 {
                ", never completed before in the recorded ops".into()
            } else {
                format!(", the same kernel completed {ran} times before (ranked after kernels that never did)")
            };
            let age = now.saturating_sub(o.time_ns);
            let evidence = format!(
                "{what}{history}, launched {:.3} ms before the last recorded launch",
                age as f64 / 1e6
            );
            (
                (class, ran > 0, std::cmp::Reverse(o.time_ns)),
                Ranked {
                    stream: i,
                    seq,
                    at: Some(at),
                    evidence,
                },
            )
        })
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, r)| r).collect()
}

/// Judges like [`judge`], with kernel names and a device-side assert's kernel as extra evidence.
pub(crate) fn judge_with(
    views: &[StreamView],
    context: Option<usize>,
    clues: &mut Clues,
) -> Verdict {
    let in_scope = scope(views, context);
    // Per stream with unfinished work: (stream index, first unfinished seq). Synchronous copies
    // completed before they were recorded and are skipped; an unfinished op that fell out of the
    // ring still counts (its seq is completed + 1).
    let pending: Vec<(usize, u64)> = in_scope
        .iter()
        .filter_map(|&i| {
            let v = &views[i];
            let done = v.completed();
            let oldest = v.ops.first().map_or(v.issued + 1, |o| o.seq);
            if done + 1 < oldest && done < v.issued {
                return Some((i, done + 1));
            }
            v.ops
                .iter()
                .find(|o| o.seq > done && !o.synchronous)
                .map(|o| (i, o.seq))
        })
        .collect();
    let find = |i: usize, seq: u64| {
        views[i]
            .ops
            .iter()
            .position(|o| o.seq == seq)
            .map(|j| (i, j))
    };
    // Markers prove a stream's candidate when the stream has a marker slot and the candidate's
    // own marker was enqueued (or nothing was issued after it: then it is the only possibility).
    // A candidate that fell out of the ring is taken as marked, as nearly every op is.
    let proven = |i: usize, seq: u64| {
        views[i].marker.is_some()
            && (seq == views[i].issued || find(i, seq).is_none_or(|(_, j)| views[i].ops[j].marked))
    };
    let all_marked = pending.iter().all(|&(i, seq)| proven(i, seq));
    let unfinished: Vec<OpAt> = pending
        .iter()
        .flat_map(|&(i, first)| {
            views[i]
                .ops
                .iter()
                .enumerate()
                .filter(move |(_, o)| o.seq >= first && !o.synchronous)
                .map(move |(j, _)| (i, j))
        })
        .collect();
    let op = |at: OpAt| -> &OpRecord { &views[at.0].ops[at.1] };
    let assert_kernel = clues.assert_kernel;
    let runs_assert_kernel = |clues: &mut Clues, at: OpAt| -> bool {
        assert_kernel.is_some_and(|k| {
            (clues.kernels)(op(at))
                .iter()
                .any(|n| cudablame_report::model::DeviceAssert::names_kernel(n, k))
        })
    };

    if pending.is_empty() {
        return Verdict {
            confidence: Confidence::Suspect,
            culprit: None,
            reason: "every op cudablame recorded in this context had completed; the fault came from \
                     work it did not see (an unhooked entry point, or an op that fell out of the ring)"
                .into(),
            suspects: Vec::new(),
            candidates: Vec::new(),
            not_exact: Some("no recorded op was unfinished".into()),
            assert_matched: false,
        };
    }

    let mut candidates = Vec::new();
    let mut not_exact = None;
    let mut assert_matched = false;
    let (confidence, culprit, reason) = if all_marked {
        // The candidates the device assert names, if it names one.
        let named: Vec<(usize, u64)> = pending
            .iter()
            .copied()
            .filter(|&(i, seq)| find(i, seq).is_some_and(|at| runs_assert_kernel(clues, at)))
            .collect();
        let ranked = rank(views, &pending, clues);
        let kernel = assert_kernel.unwrap_or("");
        if pending.len() > 1 && named.len() == 1 {
            let (i, seq) = named[0];
            assert_matched = true;
            let reason = format!(
                "the driver printed a device-side assert in kernel {kernel}, and of the {} candidates \
                 (the first unfinished op of each stream with unfinished work, proven by the progress \
                 markers) only op #{seq} on stream {} runs a kernel of that name",
                pending.len(),
                views[i].id.describe()
            );
            // The others stay listed, in rank order.
            candidates = ranked;
            candidates.sort_by_key(|r| (r.stream, r.seq) != (i, seq));
            (Confidence::Exact, find(i, seq), reason)
        } else {
            let (i, seq) = (ranked[0].stream, ranked[0].seq);
            let v = &views[i];
            let marker = v.completed();
            let culprit = find(i, seq);
            let missing = if culprit.is_none() {
                format!(" (op #{seq} is no longer in the ring: raise CUDABLAME_RING)")
            } else {
                String::new()
            };
            if pending.len() == 1 {
                assert_matched = named.len() == 1;
                let also = if assert_matched {
                    format!(
                        "; the device-side assert the driver printed names its kernel, {kernel}"
                    )
                } else {
                    String::new()
                };
                let reason = format!(
                    "progress marker of stream {} proves ops up to #{marker} completed, so op #{seq} started and \
                     never completed; no other stream of the context had unfinished work{also}{missing}",
                    v.id.describe()
                );
                (Confidence::Exact, culprit, reason)
            } else {
                let others: Vec<String> = ranked[1..]
                    .iter()
                    .map(|r| format!("#{} on stream {}", r.seq, views[r.stream].id.describe()))
                    .collect();
                let reason = format!(
                    "{} streams had unfinished work when the error surfaced; progress markers name one \
                     candidate per stream and op #{seq} on stream {} ranks first: {} (others: {}){missing}",
                    pending.len(),
                    v.id.describe(),
                    ranked[0].evidence,
                    others.join(", ")
                );
                let assert_note = match (assert_kernel, named.len()) {
                    (Some(k), 0) => format!(
                        "; the device-side assert names kernel {k}, which no candidate runs"
                    ),
                    (Some(k), n) => format!(
                        "; the device-side assert names kernel {k}, which {n} candidates run"
                    ),
                    (None, _) => String::new(),
                };
                not_exact = Some(format!(
                    "{} streams had unfinished work and a fault stops all of them: the markers prove which op \
                     each stream was at, not which one faulted{assert_note}",
                    pending.len()
                ));
                candidates = ranked;
                (Confidence::Likely, culprit, reason)
            }
        }
    } else {
        // No markers: the one unfinished kernel the assert names, else the most recent kernel.
        let named: Vec<OpAt> = unfinished
            .iter()
            .copied()
            .filter(|&at| runs_assert_kernel(clues, at))
            .collect();
        not_exact = Some(
            "no progress markers: any op issued since the last successful synchronization may have faulted"
                .into(),
        );
        if named.len() == 1 {
            assert_matched = true;
            let reason = format!(
                "no progress markers (CUDABLAME_MARKERS=off, or the driver refused them); the device-side \
                 assert the driver printed names kernel {}, and only this one of the {} unfinished ops runs it",
                assert_kernel.unwrap_or(""),
                unfinished.len()
            );
            (Confidence::Likely, Some(named[0]), reason)
        } else {
            let latest = unfinished
                .iter()
                .copied()
                .filter(|&at| op(at).launch.kind == OpKind::Kernel)
                .max_by_key(|&at| op(at).time_ns)
                .or_else(|| unfinished.iter().copied().max_by_key(|&at| op(at).time_ns));
            let reason = format!(
                "no progress markers (CUDABLAME_MARKERS=off, or the driver refused them): {} ops had been \
                 issued since the last successful synchronization; this is the most recent kernel among them",
                unfinished.len()
            );
            (Confidence::Suspect, latest, reason)
        }
    };

    let mut suspects: Vec<OpAt> = unfinished
        .into_iter()
        .filter(|&at| Some(at) != culprit)
        .collect();
    // First-unfinished ops of other streams first (in candidate rank), then the rest by launch
    // time.
    suspects.sort_by_key(|&at| {
        let rank = candidates
            .iter()
            .position(|r| r.at == Some(at))
            .or_else(|| {
                pending
                    .iter()
                    .position(|&(i, s)| i == at.0 && op(at).seq == s)
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
        not_exact,
        assert_matched,
    }
}

/// The views a verdict on `context` looks at: that context's streams (a sticky error is per
/// context), or every stream when the context is unknown or has none.
fn scope(views: &[StreamView], context: Option<usize>) -> Vec<usize> {
    match context {
        Some(c) if views.iter().any(|v| v.context == c) => (0..views.len())
            .filter(|&i| views[i].context == c)
            .collect(),
        _ => (0..views.len()).collect(),
    }
}

/// Caps a verdict below `exact` when work cudablame never saw may hide the culprit, and says why
/// in its reason: work enqueued by an entry point it does not record (`cuLaunchHostFunc`, ...)
/// that may not have completed, a stream whose ring it could not read (busy), or destroyed
/// streams of the context dropped from the retired list with work possibly unfinished
/// (`dropped_unfinished`).
pub(crate) fn cap_for_unseen_work(
    verdict: &mut Verdict,
    views: &[StreamView],
    context: Option<usize>,
    dropped_unfinished: u64,
) {
    let mut why: Vec<String> = Vec::new();
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
            "{dropped_unfinished} destroyed stream(s) of the context with possibly unfinished work \
             are no longer kept"
        ));
    }
    if why.is_empty() {
        return;
    }
    if verdict.confidence == Confidence::Exact {
        verdict.confidence = Confidence::Likely;
    }
    verdict.reason = format!("{}; not exact: {}", verdict.reason, why.join("; "));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::entry_points::EntryPoint;
    use crate::record::{Launch, StreamId};
    use crate::stack::StackRef;

    fn op(seq: u64, kind: OpKind, time_ns: u64) -> OpRecord {
        OpRecord {
            seq,
            launch: Launch {
                kind,
                handle: seq as usize,
                grid: [1, 1, 1],
                block: [32, 1, 1],
                shared_mem_bytes: 0,
                bytes: 0,
                stream: 0,
            },
            entry_point: EntryPoint::cuLaunchKernel,
            stream: StreamId::Legacy,
            context: 1,
            device: 0,
            thread: 7,
            time_ns,
            synchronous: false,
            marked: true,
            stack: StackRef::None,
            python: crate::stack::python::PythonStack::EMPTY,
        }
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
        cap_for_unseen_work(&mut v, &views, Some(1), 0);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.reason.contains("cuLaunchHostFunc"), "{}", v.reason);
        // Unseen work that a later marker proves complete changes nothing.
        views[0].unseen_after = 5;
        let mut v = judge(&views, Some(1));
        cap_for_unseen_work(&mut v, &views, Some(1), 0);
        assert_eq!(v.confidence, Confidence::Exact);
        // Dropped destroyed streams with unfinished work, and busy rings, cap it too.
        cap_for_unseen_work(&mut v, &views, Some(1), 2);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.reason.contains("2 destroyed stream"), "{}", v.reason);
        let mut busy = vec![
            stream(0x10, 1, 4, Some(1), 0, 0),
            stream(0x20, 1, 9, Some(3), 0, 0),
        ];
        busy[1].busy = true;
        busy[1].ops.clear();
        let mut v = judge(&busy[..1], Some(1));
        cap_for_unseen_work(&mut v, &busy, Some(1), 0);
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.reason.contains("busy"), "{}", v.reason);
    }

    #[test]
    fn a_verdict_looks_at_the_reporting_context_only() {
        // Context 1: a fault on 0x10 (#2). Context 2, current on the reporting thread: a slow
        // kernel still running. Blaming context 1 (the stream that reported) names #2 of 0x10.
        let views = vec![
            stream(0x10, 1, 3, Some(1), 0, 0),
            stream(0x20, 2, 1, Some(0), 0, 1000),
        ];
        let v = judge(&views, Some(1));
        assert_eq!((v.confidence, v.culprit), (Confidence::Exact, Some((0, 1))));
        assert!(v.suspects.iter().all(|&(i, _)| i == 0));
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
    fn finished_streams_and_other_contexts_do_not_count() {
        let views = vec![
            stream(0x10, 1, 5, Some(5), 0, 0),   // all done
            stream(0x20, 1, 8, Some(3), 0, 100), // #4 faulted
            stream(0x30, 2, 9, Some(1), 0, 0),   // other context, unfinished
        ];
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Exact);
        assert_eq!(v.culprit, Some((1, 3)));
        assert!(v.suspects.iter().all(|&(i, _)| i == 1));
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
    fn culprit_out_of_the_ring_is_said() {
        let mut views = vec![stream(0x10, 1, 300, Some(10), 0, 0)];
        views[0].ops.drain(..200); // ring kept #201..#300
        let v = judge(&views, Some(1));
        assert_eq!(v.confidence, Confidence::Exact);
        assert_eq!(v.culprit, None);
        assert!(
            v.reason.contains("#11 is no longer in the ring"),
            "{}",
            v.reason
        );
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
        assert_eq!(judge(&views, Some(1)).confidence, Confidence::Suspect);
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
        let mut kernels = |o: &OpRecord| -> Vec<String> {
            names
                .iter()
                .filter(|(h, _)| *h == o.launch.handle)
                .map(|(_, n)| n.to_string())
                .collect()
        };
        judge_with(
            views,
            Some(1),
            &mut Clues {
                kernels: &mut kernels,
                assert_kernel,
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
    fn an_assert_naming_several_or_no_candidates_stays_likely() {
        let views = vec![
            stream_of(0x10, 2, 1, 0, 100),
            stream_of(0x20, 2, 1, 1000, 100),
        ];
        let names = [(100, "check_kernel(int*)")];
        let v = judge_named(&views, &names, Some("check_kernel"));
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.not_exact.unwrap().contains("which 2 candidates run"));
        let v = judge_named(&views, &names, Some("other_kernel"));
        assert_eq!(v.confidence, Confidence::Likely);
        assert!(v.not_exact.unwrap().contains("which no candidate runs"));
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
