//! Which ops get a progress marker (`CUDABLAME_MARKERS`): a pure decision from host times and
//! counts, unit tested without any driver.
//!
//! Why not every op: a marker is a `cuStreamWriteValue64`, and every stream memory operation
//! carries a system-scope memory fence before its write. Measured on an H200 (driver 580.159.04,
//! CUDA 13.0; `/work/shared/notes/cuda-facts.md`, third round): **+2.0 to +2.1 µs of GPU time per
//! marked op** (ops queued behind a blocked stream, timed with events; a tiny kernel takes 1.54
//! µs, a 1M-element one 5.1 µs), **+1.0 to +1.5 µs of the launching thread's time**, and one
//! entry of the driver's launch queue (behind a blocked stream the host blocked after 510
//! launches instead of 1,021). A second thread issuing the markers, events, or a
//! `NO_MEMORY_BARRIER` write are all worse or refused (same notes). So the only lever is to mark
//! fewer ops.
//!
//! The budget ([`MarkerMode::Budget`], the default) marks an op when, after its real launch:
//! - the stream never had a marker (its first op), or
//! - at least the stream's gap ([`Marks::gap_ns`]) of host time passed since its last marker:
//!   with markers costing `c` µs each and a share `s` of the time allowed, one marker per `c / s`
//!   µs. The default gap, 500 µs, is 2.1 µs GPU / 0.4% and 1.1 to 1.8 µs host / 0.2 to 0.4%.
//!   **Stretched by the host's own marker cost** (unless `CUDABLAME_MARKER_GAP_US` is set): a
//!   marker is one more driver call, and on a slow host it costs what a launch costs there (a
//!   PyTorch GPT step on an H100 host whose launches took 5 to 10 µs: 6.6 µs per marker, 308 ns
//!   per op, 28% of cudablame's own time; twenty-first session). Each stream keeps a running
//!   mean of its budget markers' host time (`Marks::note_marker_cost`) and its gap is at least
//!   [`HOST_SHARE_INV`] times that (0.4% of the host's time), at most [`MAX_STRETCH`] times the
//!   configured gap: 500 µs where a marker takes up to 2 µs, 1.65 ms at 6.6 µs, 2 ms at most.
//!   The bound on unmarked ops (below) still holds, so a fault's window stays at most 32 ops.
//!   A write that waited for room in the driver's queue (a GPU-bound stream) counts as slow
//!   too, clipped: its stream then gets fewer time-gap markers, which saves GPU time there,
//!   and the count bound, which sets such a stream's markers, is unchanged.
//!   It was 100 µs (2% and 1-2%), which cost a GPU-bound PyTorch GPT step 416 ns of the
//!   launching thread's time per op on average (H200: 3,114 of 13,658 ops marked, 1.8 µs each):
//!   the time since the last marker includes the time the host waits for the GPU, so in a step
//!   of 20 ms with 471 launches a 100 µs gap marks about one op in four. With 500 µs the bound
//!   on unmarked ops (below) sets the windows' length in a dense launch burst, as it should.
//!   Host time stands in
//!   for the stream's GPU time: while the host runs ahead the GPU later runs those ops at most as
//!   fast as they came (the probe above: 400 ops enqueued in about 2 ms), and when the GPU is
//!   the bottleneck the host waits in the driver, so each marker covers at least as much GPU
//!   time as host time; or
//! - the stream was idle (the previous op carried the last marker and the device already wrote
//!   it: one plain load of the marker slot) and [`Marks::idle_gap_ns`] passed: a marker behind an
//!   op that completes before the next one arrives costs the GPU nothing, only host time, so
//!   only the host share binds (half the gap); or
//! - [`Budget::max_unmarked`] ops in a row went unmarked (bounded windows: a fault is then
//!   narrowed to at most `max_unmarked + 1` ops in stream order); or
//! - it is a blocking copy that proves nothing (a direction cudablame could not tell, see
//!   `record::Proves`): the host waited for it, so its marker costs the GPU nothing.
//!
//! Asynchronous copies are ops like any other. They used to be marked always ("copies usually come
//! right before the host waits for a result"), but a marker after the last op before a wait
//! narrows no window (the window already ends there), and a GPU-bound PyTorch GPT step makes 21
//! `cuMemcpy*Async` per step: 525 of its 1,384 markers (H200, 25 steps), about 170 ns of the
//! launching thread's time per op.
//!
//! [`MarkerMode::Every`] keeps a marker after every op (exact illegal-address verdicts at the
//! price above); [`MarkerMode::Off`] none (culprits are only suspects).

pub(crate) use crate::config::MarkerMode;

/// A stream's gap is at least this many times its budget markers' mean host time: markers take
/// at most 1/250 (0.4%) of the launching threads' time between calls, the share the default
/// gap was set for (module doc).
pub(crate) const HOST_SHARE_INV: u64 = 250;

/// The host share stretches a stream's gap to at most this many times the configured one (a
/// fault's window then spans at most 2 ms of host time by default; a marker that waited for
/// room in the driver's queue, which is the GPU's time and not the host's, moves the mean by at
/// most this much).
pub(crate) const MAX_STRETCH: u64 = 4;

/// The marker budget: when [`should_mark`] marks an op. Times in ns of host wall-clock time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Host time after the stream's last marker from which the next op is marked, before the
    /// stream's own marker cost stretches it ([`Marks::gap_ns`]).
    pub(crate) gap_ns: u64,
    /// The longest that stretching makes the gap: `gap_ns` when the gap was configured
    /// (`CUDABLAME_MARKER_GAP_US`), else [`MAX_STRETCH`] times it.
    pub(crate) max_gap_ns: u64,
    /// The most ops in a row left unmarked on one stream.
    pub(crate) max_unmarked: u32,
}

impl Budget {
    /// The budget for a gap of `gap_us` µs (`CUDABLAME_MARKER_GAP_US`) and windows of at most
    /// `window` ops (`CUDABLAME_MARKER_WINDOW`, at least 2: `window - 1` unmarked ops in a row);
    /// `stretch`: the gap may grow with the host's marker cost (the default gap), or not (a
    /// configured one is kept as given).
    pub(crate) fn new(gap_us: u64, window: u32, stretch: bool) -> Budget {
        let gap_ns = gap_us * 1000;
        Budget {
            gap_ns,
            max_gap_ns: if stretch {
                gap_ns * MAX_STRETCH
            } else {
                gap_ns
            },
            max_unmarked: window.max(2) - 1,
        }
    }
}

/// What [`should_mark`] remembers of one stream's markers (kept under the stream's ring lock).
///
/// "Host time since the last marker" is the launching threads' time *between* the stream's
/// recorded calls: the time inside them (the driver's work, and above all a launch blocked until
/// the driver's queue has room, which is most of a GPU-bound step's time) is left out. A marker
/// written while the host would wait for the GPU anyway costs it nothing; counting that waiting
/// as host time marked a GPU-bound PyTorch GPT step 33 times per step at a 500 µs gap (H200:
/// 10.4 µs per launch inside the driver, markers 3.5 to 4.9 µs each, the waiting included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    /// Host time (ns) outside the stream's recorded calls since its last marker, up to the
    /// return of the previous call.
    pub(crate) busy_ns: u64,
    /// When the stream's previous recorded call returned (ns, `CLOCK_REALTIME`); 0: none yet.
    pub(crate) returned_ns: u64,
    /// Sequence number of the op the last marker follows (0: none).
    pub(crate) last_seq: u64,
    /// Ops recorded since the last marker, unmarked.
    pub(crate) unmarked: u32,
    /// Ops marked on this stream so far (for `CUDABLAME_STATS`).
    pub(crate) marked_total: u64,
    /// Running mean (weight 1/8) of the host time (ns) the stream's budget markers took, each
    /// clipped so that it stretches the gap to at most [`Budget::max_gap_ns`]; 0: none yet.
    pub(crate) marker_ns: u64,
}

impl Marks {
    /// Notes a marker the driver took behind op `seq`, the stream's newest (by the budget, or
    /// before the host waits for the stream, `record::sync`): the next op's budget starts afresh.
    pub(crate) fn marker_taken(&mut self, seq: u64) {
        self.busy_ns = 0;
        self.last_seq = seq;
        self.unmarked = 0;
        self.marked_total += 1;
    }

    /// The host time after the last marker from which the next op is marked under `budget`:
    /// the configured gap, stretched to [`HOST_SHARE_INV`] times this stream's marker cost, at
    /// most [`Budget::max_gap_ns`].
    #[inline(always)]
    pub(crate) fn gap_ns(&self, budget: &Budget) -> u64 {
        (self.marker_ns * HOST_SHARE_INV)
            .min(budget.max_gap_ns)
            .max(budget.gap_ns)
    }

    /// The same when the stream is idle (the last marker, right behind the previous op, was
    /// already written by the device): the marker then costs no GPU time, only host time, so
    /// half the gap.
    #[inline(always)]
    pub(crate) fn idle_gap_ns(&self, budget: &Budget) -> u64 {
        self.gap_ns(budget) / 2
    }

    /// Notes that a marker the budget asked for took `ns` of the launching thread's time (its
    /// write call), in the running mean, clipped under `budget`. Markers of a stream's first op
    /// (the driver may set up stream memory operations then) and markers before a wait
    /// (`record::sync`, not the budget's) are not noted.
    pub(crate) fn note_marker_cost(&mut self, ns: u64, budget: &Budget) {
        let sample = ns.min(budget.max_gap_ns / HOST_SHARE_INV);
        self.marker_ns = if self.marker_ns == 0 {
            sample.max(1)
        } else {
            (self.marker_ns * 7 + sample) / 8
        };
    }

    /// Host time outside recorded calls since the last marker for an op whose call began at
    /// `now_ns` (`None`: the clock stepped back).
    fn busy_until(&self, now_ns: u64) -> Option<u64> {
        let between = now_ns.checked_sub(self.returned_ns)?;
        Some(self.busy_ns.saturating_add(between))
    }

    /// The common answer of [`should_mark`] for an op that is not a blocking copy, recorded at
    /// `now_ns` and returned at `returned_ns`: true when it is surely not due under `mode` and
    /// `budget` (a stream with a marker, fewer than the most unmarked ops in a row, less host
    /// time than the idle gap since the last marker), and then notes it as unmarked, as
    /// [`note`](Self::note) would. False: ask [`should_mark`]. The hot path's whole marker
    /// decision for most ops (`record::hot::mark_if_due`).
    #[inline(always)]
    pub(crate) fn surely_not_due(
        &mut self,
        mode: MarkerMode,
        budget: &Budget,
        now_ns: u64,
        returned_ns: u64,
    ) -> bool {
        if mode != MarkerMode::Budget || self.last_seq == 0 || self.unmarked >= budget.max_unmarked
        {
            return false;
        }
        match self.busy_until(now_ns) {
            Some(since) if since < self.idle_gap_ns(budget) => {
                self.busy_ns = since;
                self.unmarked += 1;
                self.returned_ns = returned_ns.max(now_ns);
                true
            }
            _ => false,
        }
    }

    /// Notes op `seq`, whose call began at `now_ns` and returned at `returned_ns`: marked (the
    /// driver took its marker) or not.
    pub(crate) fn note(&mut self, seq: u64, now_ns: u64, returned_ns: u64, marked: bool) {
        if marked {
            self.marker_taken(seq);
        } else {
            // A clock stepped back: the next op is marked anyway (`should_mark`).
            self.busy_ns = self.busy_until(now_ns).unwrap_or(u64::MAX);
            self.unmarked = self.unmarked.saturating_add(1);
        }
        self.returned_ns = returned_ns.max(now_ns);
    }
}

/// Why [`should_mark`] marks an op (counted per reason by `CUDABLAME_STATS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// `CUDABLAME_MARKERS=every`.
    Every,
    /// The stream's first op.
    First,
    /// [`Budget::max_unmarked`] ops in a row went unmarked.
    Count,
    /// A blocking copy that proves nothing.
    Copy,
    /// [`Marks::gap_ns`] passed since the stream's last marker (or the clock stepped back).
    Gap,
    /// The stream was idle and [`Marks::idle_gap_ns`] passed.
    Idle,
    /// The host is about to wait for the stream: its newest op gets a marker
    /// (`record::sync`, outside this policy).
    Wait,
}

/// Reasons, in [`Why`] order, for the stats line.
pub(crate) const WHY_NAMES: [&str; 7] = ["every", "first", "count", "copy", "gap", "idle", "wait"];

/// Whether op `seq` (`blocking_copy`: a blocking copy that proves nothing), recorded at host time
/// `now_ns`, gets a progress marker under `mode` and `budget`, given the stream's `marks`, and
/// why. `slot` reads the stream's marker slot (the last sequence number the device wrote); it is
/// called only when its answer matters.
pub(crate) fn should_mark(
    mode: MarkerMode,
    budget: &Budget,
    marks: &Marks,
    now_ns: u64,
    seq: u64,
    blocking_copy: bool,
    slot: impl FnOnce() -> u64,
) -> Option<Why> {
    match mode {
        MarkerMode::Off => return None,
        MarkerMode::Every => return Some(Why::Every),
        MarkerMode::Budget => {}
    }
    if marks.last_seq == 0 {
        return Some(Why::First);
    }
    if marks.unmarked >= budget.max_unmarked {
        return Some(Why::Count);
    }
    if blocking_copy {
        return Some(Why::Copy);
    }
    // A clock stepped back counts as a long gap (one marker too many, never a window too long).
    let Some(since) = marks.busy_until(now_ns) else {
        return Some(Why::Gap);
    };
    if since >= marks.gap_ns(budget) {
        return Some(Why::Gap);
    }
    (since >= marks.idle_gap_ns(budget) && marks.last_seq + 1 == seq && slot() >= marks.last_seq)
        .then_some(Why::Idle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;

    /// Runs `should_mark` over ops recorded at the given host times (µs), every marker taken by
    /// the driver and the device `done` behind (the slot holds the last marked seq that many µs
    /// after it was enqueued; `u64::MAX`: never); returns the marked sequence numbers.
    fn marked(
        mode: MarkerMode,
        times_us: &[u64],
        blocking_copies: &[bool],
        done_after_us: u64,
    ) -> Vec<u64> {
        marked_calls(mode, times_us, 0, blocking_copies, done_after_us)
    }

    /// [`marked`] with each recorded call taking `call_us` µs (from its time to its return).
    fn marked_calls(
        mode: MarkerMode,
        times_us: &[u64],
        call_us: u64,
        blocking_copies: &[bool],
        done_after_us: u64,
    ) -> Vec<u64> {
        let b = Budget::new(100, 32, true);
        let mut m = Marks::default();
        let mut out = Vec::new();
        let mut written: Vec<(u64, u64)> = Vec::new(); // (host µs, seq) of each marker
        for (i, &t) in times_us.iter().enumerate() {
            let seq = i as u64 + 1;
            let copy = blocking_copies.get(i).copied().unwrap_or(false);
            let slot = || {
                written
                    .iter()
                    .filter(|(at, _)| at.saturating_add(done_after_us) <= t)
                    .map(|w| w.1)
                    .max()
                    .unwrap_or(0)
            };
            let mark = should_mark(mode, &b, &m, t * US + 1, seq, copy, slot).is_some();
            if mark {
                written.push((t, seq));
                out.push(seq);
            }
            m.note(seq, t * US + 1, (t + call_us) * US + 1, mark);
        }
        out
    }

    /// The hot path's shortcut (`Marks::surely_not_due`) never decides otherwise than
    /// `should_mark` followed by `note`, and leaves the same state: over a pseudo-random
    /// schedule of host gaps (a few ns to past the gap), call lengths, clocks stepped back,
    /// markers refused by the driver, markers' host costs that stretch the gap (or not), every
    /// mode, windows from 2 to 64, configured gaps and stretched ones.
    #[test]
    fn the_hot_paths_shortcut_agrees_with_the_policy() {
        let mut next = crate::test_util::xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut shortcuts = 0;
        for mode in [MarkerMode::Budget, MarkerMode::Every, MarkerMode::Off] {
            for (gap_us, window, stretch) in [
                (500, 32, true),
                (500, 32, false),
                (100, 2, true),
                (1, 64, true),
                (1_000_000, 8, false),
            ] {
                let b = Budget::new(gap_us, window, stretch);
                let (mut slow, mut fast) = (Marks::default(), Marks::default());
                let mut returned = 1_000_000u64;
                for seq in 1..5_000u64 {
                    // The host's time from the last call's return to this one's start.
                    let t = match next(20) {
                        0 => returned.saturating_sub(next(3_000)), // the clock stepped back
                        1 => returned + next(2 * b.gap_ns + 1),
                        _ => returned + next(b.gap_ns / 16 + 50),
                    };
                    returned = t + next(5_000);
                    let taken = next(7) != 0; // the driver took the marker
                                              // The device wrote every marker so far (an idle stream), or not.
                    let slot = if next(2) == 0 { seq } else { next(seq + 1) };
                    let want = should_mark(mode, &b, &slow, t, seq, false, || slot);
                    slow.note(seq, t, returned, want.is_some() && taken);
                    // The marker's host time: up to twice what stretches the gap the most (so
                    // that gaps between the configured and the longest occur), or a write
                    // that waited 1 ms.
                    let most = b.max_gap_ns / HOST_SHARE_INV;
                    let cost = if next(50) == 0 {
                        1_000_000
                    } else {
                        next(2 * most + 1)
                    };
                    if want.is_some() && taken {
                        slow.note_marker_cost(cost, &b);
                    }
                    if fast.surely_not_due(mode, &b, t, returned) {
                        shortcuts += 1;
                        assert_eq!(want, None, "seq {seq}: the shortcut skipped a due op");
                    } else {
                        let due = should_mark(mode, &b, &fast, t, seq, false, || slot);
                        assert_eq!(due, want, "seq {seq}");
                        fast.note(seq, t, returned, due.is_some() && taken);
                        if due.is_some() && taken {
                            fast.note_marker_cost(cost, &b);
                        }
                    }
                    assert_eq!(
                        fast, slow,
                        "seq {seq}, {mode:?}, gap {gap_us} window {window} stretch {stretch}"
                    );
                }
            }
        }
        assert!(
            shortcuts > 10_000,
            "the shortcut was taken {shortcuts} times"
        );
    }

    #[test]
    fn a_fast_launch_loop_is_marked_by_time_and_by_count() {
        // 4 µs per launch (the H200's empty-kernel loop), the GPU far behind: one marker per
        // 100 µs, i.e. every 25th op.
        let times: Vec<u64> = (0..200).map(|i| i * 4).collect();
        let got = marked(MarkerMode::Budget, &times, &[], u64::MAX);
        assert_eq!(&got[..4], &[1, 26, 51, 76]);
        assert_eq!(got.len(), 8);
        // 1 µs per launch: the count binds, windows of 32 ops.
        let times: Vec<u64> = (0..100).collect();
        assert_eq!(
            marked(MarkerMode::Budget, &times, &[], u64::MAX),
            vec![1, 33, 65, 97]
        );
    }

    #[test]
    fn the_window_setting_bounds_the_unmarked_ops() {
        // 1 µs per launch, a 1 s gap: only the count marks. `CUDABLAME_MARKER_WINDOW=8`: an op
        // in eight; 2 (the least): every other op.
        for (window, want) in [(8, vec![1, 9, 17, 25]), (2, vec![1, 3, 5, 7])] {
            let b = Budget::new(1_000_000, window, true);
            let mut m = Marks::default();
            let mut got = Vec::new();
            for seq in 1..=(want.last().copied().unwrap_or(0) + 1) {
                let t = seq * US;
                let mark = should_mark(MarkerMode::Budget, &b, &m, t, seq, false, || 0).is_some();
                if mark {
                    got.push(seq);
                }
                m.note(seq, t, t + 1, mark);
            }
            assert_eq!(got, want, "window {window}");
        }
    }

    #[test]
    fn time_blocked_inside_the_calls_is_not_host_time() {
        // A GPU-bound loop: each launch waits 30 µs in the driver for queue room, then the host
        // works 4 µs until the next one (34 µs apart). By wall time the 100 µs gap would mark
        // every third op; the host's own time marks every 25th, as without the waiting.
        let times: Vec<u64> = (0..200).map(|i| i * 34).collect();
        let got = marked_calls(MarkerMode::Budget, &times, 30, &[], u64::MAX);
        assert_eq!(&got[..4], &[1, 26, 51, 76]);
        assert_eq!(got.len(), 8);
        // Host work between the calls still counts: 150 µs of it before each op marks each.
        let times: Vec<u64> = (0..10).map(|i| i * 180).collect();
        assert_eq!(
            marked_calls(MarkerMode::Budget, &times, 30, &[], u64::MAX),
            (1..=10).collect::<Vec<_>>()
        );
    }

    #[test]
    fn ops_separated_by_long_host_gaps_are_each_marked() {
        let times: Vec<u64> = (0..10).map(|i| i * 150).collect();
        assert_eq!(
            marked(MarkerMode::Budget, &times, &[], u64::MAX),
            (1..=10).collect::<Vec<_>>()
        );
    }

    #[test]
    fn an_idle_stream_is_marked_at_half_the_gap() {
        // 60 µs apart: above the idle gap (50), below the gap (100).
        let times: Vec<u64> = (0..6).map(|i| i * 60).collect();
        // The device writes each marker within 10 µs: the stream is idle at every launch.
        assert_eq!(
            marked(MarkerMode::Budget, &times, &[], 10),
            vec![1, 2, 3, 4, 5, 6]
        );
        // The device never catches up: only the gap counts (0, 120, 240 µs).
        assert_eq!(
            marked(MarkerMode::Budget, &times, &[], u64::MAX),
            vec![1, 3, 5]
        );
    }

    #[test]
    fn blocking_copies_are_marked_and_modes_override() {
        let times = [0, 1, 2, 3, 4];
        // Op 3 is a blocking copy that proves nothing; an asynchronous copy is an op like any
        // other (it used to be marked always).
        let kinds = [false, false, true, false, false];
        assert_eq!(
            marked(MarkerMode::Budget, &times, &kinds, u64::MAX),
            vec![1, 3]
        );
        assert_eq!(
            marked(MarkerMode::Budget, &times, &[false; 5], u64::MAX),
            vec![1]
        );
        assert_eq!(
            marked(MarkerMode::Every, &times, &kinds, u64::MAX),
            vec![1, 2, 3, 4, 5]
        );
        assert!(marked(MarkerMode::Off, &times, &kinds, 0).is_empty());
    }

    /// The marked ops of a stream whose ops come `every_us` µs of host time apart, `n` of them,
    /// each budget marker (not the first op's) taking `marker_ns` of host time, under `budget`;
    /// and the stream's gap at the end (µs).
    fn marked_costing(budget: Budget, every_us: u64, n: u64, marker_ns: u64) -> (Vec<u64>, u64) {
        let mut m = Marks::default();
        let mut out = Vec::new();
        for seq in 1..=n {
            let t = seq * every_us * US;
            let why = should_mark(MarkerMode::Budget, &budget, &m, t, seq, false, || 0);
            m.note(seq, t, t, why.is_some());
            if let Some(why) = why {
                out.push(seq);
                if why != Why::First {
                    m.note_marker_cost(marker_ns, &budget);
                }
            }
        }
        (out, m.gap_ns(&budget) / US)
    }

    #[test]
    fn a_host_whose_markers_are_slow_marks_less_often() {
        // Ops 100 µs of host time apart, the default gap of 500 µs: every fifth op where a
        // marker takes 1.5 µs (an H100 host with fast driver calls: 0.3% of the host's time,
        // under the 0.4% the gap allows, so the gap stays as configured).
        let b = Budget::new(500, 32, true);
        let (fast, gap) = marked_costing(b, 100, 100, 1_500);
        assert_eq!(&fast[..4], &[1, 6, 11, 16]);
        assert_eq!((fast.len(), gap), (20, 500));
        // 6.6 µs a marker (the twenty-first session's H100 host, a PyTorch GPT step): the gap
        // grows to 250 times that, 1,650 µs, after the first budget marker (op 6): every
        // seventeenth op from there.
        let (slow, gap) = marked_costing(b, 100, 100, 6_600);
        assert_eq!(slow, vec![1, 6, 23, 40, 57, 74, 91]);
        assert_eq!(gap, 1_650);
        // 50 µs a marker (or a write that waited for queue room): at most four times the
        // configured gap, 2 ms.
        let (_, gap) = marked_costing(b, 100, 100, 50_000);
        assert_eq!(gap, 2_000);
        // Ops closer than the gap over the window: the bound on unmarked ops still binds.
        let (dense, gap) = marked_costing(b, 10, 200, 6_600);
        assert_eq!(&dense[..4], &[1, 33, 65, 97]);
        assert_eq!(gap, 1_650);
    }

    #[test]
    fn a_configured_gap_is_not_stretched() {
        // `CUDABLAME_MARKER_GAP_US=500`: every fifth op whatever the markers cost.
        let b = Budget::new(500, 32, false);
        let (got, gap) = marked_costing(b, 100, 100, 6_600);
        assert_eq!(&got[..4], &[1, 6, 11, 16]);
        assert_eq!((got.len(), gap), (20, 500));
    }

    #[test]
    fn the_marker_cost_is_a_running_mean_that_forgets_a_slow_write() {
        let b = Budget::new(500, 32, true);
        let mut m = Marks::default();
        m.note_marker_cost(2_000, &b);
        assert_eq!(
            (m.marker_ns, m.gap_ns(&b), m.idle_gap_ns(&b)),
            (2_000, 500_000, 250_000)
        );
        // One write that waited 10 ms for queue room counts as 8 µs (the most that stretches
        // the gap to four times), and moves the mean by an eighth of that.
        m.note_marker_cost(10_000_000, &b);
        assert_eq!(m.marker_ns, (2_000 * 7 + 8_000) / 8);
        assert_eq!(m.gap_ns(&b), 2_750 * HOST_SHARE_INV);
        assert_eq!(m.idle_gap_ns(&b), 2_750 * HOST_SHARE_INV / 2);
        // Writes of 1.5 µs bring the gap back to the configured one, the seventh of them.
        for _ in 0..6 {
            m.note_marker_cost(1_500, &b);
        }
        assert!(m.gap_ns(&b) > 500_000, "{m:?}");
        m.note_marker_cost(1_500, &b);
        assert_eq!(m.gap_ns(&b), 500_000, "{m:?}");
    }

    #[test]
    fn a_clock_stepped_back_marks() {
        let b = Budget::new(100, 32, true);
        let mut m = Marks::default();
        m.note(1, 10_000_000, 10_000_000, true);
        let at = |now_ns| should_mark(MarkerMode::Budget, &b, &m, now_ns, 2, false, || 0);
        assert_eq!(at(5_000_000), Some(Why::Gap));
        assert_eq!(at(10_000_500), None);
    }
}
