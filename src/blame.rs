//! From the recorded streams and an error to a verdict: which op faulted, how sure we are, and
//! which other ops had not completed. Pure logic over [`StreamView`]s, unit-tested without FFI.
//!
//! Rule: on each stream, ops up to `completed` (the progress marker's value, or what a successful
//! synchronization proved) finished; the op right after is that stream's candidate, the first that
//! never finished. Only the context that reported the error is considered (a sticky error is
//! per context). One candidate with markers on its stream: `exact`. Several streams with
//! unfinished work, all with markers: `likely`, the most recently launched candidate first (a
//! busy stream's first unfinished op is typically a long-running kernel queued long before; a
//! fault kills the context within microseconds of the faulting kernel's start).
//! Without markers: `suspect`, the most recent kernel among the unfinished ops.

use crate::record::{OpKind, OpRecord, StreamView};

pub use crate::report::model::Confidence;

/// Where an op sits in the views: `(stream index, op index in that stream's ring)`.
pub type OpAt = (usize, usize);

/// The verdict.
#[derive(Debug, PartialEq)]
pub struct Verdict {
    pub confidence: Confidence,
    /// The culprit op, if it is still in its ring.
    pub culprit: Option<OpAt>,
    /// Why, in one sentence, with the numbers that prove it.
    pub reason: String,
    /// The other unfinished ops, most likely first.
    pub suspects: Vec<OpAt>,
}

/// Suspects listed at most.
pub const MAX_SUSPECTS: usize = 16;

/// Judges a sticky error reported in `context` (`None`: unknown, consider every context).
pub fn judge(views: &[StreamView], context: Option<usize>) -> Verdict {
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

    if pending.is_empty() {
        return Verdict {
            confidence: Confidence::Suspect,
            culprit: None,
            reason: "every op cudablame recorded in this context had completed; the fault came from \
                     work it did not see (an unhooked entry point, or an op that fell out of the ring)"
                .into(),
            suspects: Vec::new(),
        };
    }

    let (confidence, culprit, reason) = if all_marked {
        let mut firsts: Vec<(usize, u64)> = pending.clone();
        // Most recently launched first-unfinished op first.
        firsts.sort_by_key(|&(i, seq)| {
            std::cmp::Reverse(find(i, seq).map(|at| op(at).time_ns).unwrap_or(0))
        });
        let (i, seq) = firsts[0];
        let v = &views[i];
        let marker = v.completed();
        let culprit = find(i, seq);
        let missing = if culprit.is_none() {
            format!(" (op #{seq} is no longer in the ring: raise CUDABLAME_RING)")
        } else {
            String::new()
        };
        if firsts.len() == 1 {
            let reason = format!(
                "progress marker of stream {} proves ops up to #{marker} completed, so op #{seq} started and \
                 never completed; no other stream of the context had unfinished work{missing}",
                v.id.describe()
            );
            (Confidence::Exact, culprit, reason)
        } else {
            let others: Vec<String> = firsts[1..]
                .iter()
                .map(|&(j, s)| format!("#{s} on stream {}", views[j].id.describe()))
                .collect();
            let reason = format!(
                "{} streams had unfinished work when the error surfaced; progress markers name one \
                 candidate per stream and op #{seq} on stream {} is the most recently launched (others: {}){missing}",
                firsts.len(),
                v.id.describe(),
                others.join(", ")
            );
            (Confidence::Likely, culprit, reason)
        }
    } else {
        // No markers: the most recent kernel among the unfinished ops.
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
    };

    let mut suspects: Vec<OpAt> = unfinished
        .into_iter()
        .filter(|&at| Some(at) != culprit)
        .collect();
    // First-unfinished ops of other streams first, then the rest by launch time.
    suspects.sort_by_key(|&at| {
        let first = pending.iter().any(|&(i, s)| i == at.0 && op(at).seq == s);
        (!first, op(at).time_ns)
    });
    suspects.truncate(MAX_SUSPECTS);
    Verdict {
        confidence,
        culprit,
        reason,
        suspects,
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
pub fn cap_for_unseen_work(
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
    use crate::stack::NativeStack;

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
            stack: NativeStack::EMPTY,
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
}
