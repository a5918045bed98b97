//! What recording costs, phase by phase (`CUDABLAME_STATS=on`): host nanoseconds spent per
//! recorded op in native stack capture, Python frames, the real call, the progress marker and the
//! rest of cudablame's bookkeeping, summed over all threads and printed as one line on stderr when
//! the process exits. Off by default: then every function here is one relaxed load of the
//! configuration and nothing else.
//!
//! Phases are timed with the time-stamp counter (`rdtsc`, about 7 ns a reading on x86-64)
//! rather than `clock_gettime` (about 25 ns), as one timeline per op ([`Timeline`]: each
//! reading ends one phase and starts the next, nine readings an op, and one thread-local lookup
//! at the end; the stack copy, timed inside the ring push, takes two readings and one lookup
//! more): with a `clock_gettime` pair per phase the
//! measurement itself added an estimated 150 ns (from those per-reading costs, not measured) to
//! the "other" share it reports. Ticks become ns at exit, scaled by `CLOCK_MONOTONIC` over the
//! whole run (elsewhere the clock is used directly).

use crate::clock::ticks;
use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Once;

/// A timed part of recording one op, in the order [`enqueue`](super::hot::enqueue) runs them.
#[derive(Clone, Copy)]
pub(crate) enum Phase {
    /// Python frames (`stack::python::PythonStack::capture`).
    Python,
    /// The op's thread, kernel name and stream (`names::note`, `streams::lookup`).
    Lookup,
    /// Taking the stream's ring lock.
    Lock,
    /// The real driver call (the launch, copy or memset itself).
    RealCall,
    /// Recording the op after the call: the capture check, the ring push and the stack copy in
    /// it (the copy is also counted apart, as [`Phase::Stack`]).
    Record,
    /// Native stack: the copy of the stack's top (`stack::copy`), inside [`Phase::Record`].
    Stack,
    /// The marker policy and the `cuStreamWriteValue64` of the progress marker.
    Marker,
    /// The rest of the hook: its entry (driver and configuration checks, the op's time stamp)
    /// and its exit (the ring unlock, the stream's reference dropped).
    Rest,
}

const PHASES: usize = 8;
const REASONS: usize = super::policy::WHY_NAMES.len();
/// Hooked entry points, for the counts of the calls that record no op ([`OtherCall`]).
const ENTRY_POINTS: usize = crate::cuda::entry_points::EntryPoint::ALL.len();

/// One thread's counters. Written only by their thread (a relaxed load and store, no
/// read-modify-write: with shared atomic counters an op paid about 10 locked instructions, and
/// threads launching at once bounced their cache lines, which the stats then counted as
/// "other"); read by the exit handler. Threads' counters are never freed (a few hundred bytes
/// per thread that ever recorded an op while measuring) and are found through a lock-free list.
struct Counters {
    ticks: [AtomicU64; PHASES],
    ops: AtomicU64,
    stack_bytes: AtomicU64,
    python_frames: AtomicU64,
    marked: AtomicU64,
    held_unwinds: AtomicU64,
    held_copies: AtomicU64,
    /// Marker writes that took at least [`LONG_MARKER_NS`] (count, ns in them).
    long_markers: AtomicU64,
    long_marker_ns: AtomicU64,
    /// Markers taken by the driver, by `policy::Why`.
    marked_why: [AtomicU64; REASONS],
    /// Hooked calls that record no op (syncs, queries, event and memory calls), by entry
    /// point: how many, and cudablame's ticks in them (the real call left out).
    other_calls: [AtomicU64; ENTRY_POINTS],
    other_ticks: [AtomicU64; ENTRY_POINTS],
    /// Recorded ops' whole hooks, entry to exit (count, ticks): what the timeline leaves out
    /// (the stats' own bookkeeping at the hook's exit) shows as the difference.
    hook_ops: AtomicU64,
    hook_ticks: AtomicU64,
    /// Ops that would be recorded, run while paused (`cudablame_pause`): count, ticks in the
    /// real call, ticks of the whole hook. The same process's baseline for the real call and
    /// the hook (a paired benchmark: `cuda-samples/bench/train_step.py --paired`).
    paused_ops: AtomicU64,
    paused_real_ticks: AtomicU64,
    paused_hook_ticks: AtomicU64,
    /// Recorded ops after the process was first paused (count, ticks in the real call, in
    /// cudablame's phases, in the whole hook): in a paired benchmark the recording side of the
    /// comparison, without the warm-up's first launches (module loads, first-use costs).
    steady_ops: AtomicU64,
    steady_ticks: [AtomicU64; PHASES],
    steady_marked: AtomicU64,
    steady_hook_ticks: AtomicU64,
    /// The launching thread's time between one op's hook and its next op's (ticks from a hook's
    /// exit to the next one's entry, gaps of at most [`BETWEEN_MAX_TICKS`] with no other hooked
    /// call in them, both ops of the same side), while paused (0) and while recording after the first pause (1): the program's own
    /// work between launches, which recording can slow from outside its hook (caches).
    between_n: [AtomicU64; 2],
    between_ticks: [AtomicU64; 2],
    next: AtomicPtr<Counters>,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            ticks: [const { AtomicU64::new(0) }; PHASES],
            ops: AtomicU64::new(0),
            stack_bytes: AtomicU64::new(0),
            python_frames: AtomicU64::new(0),
            marked: AtomicU64::new(0),
            held_unwinds: AtomicU64::new(0),
            held_copies: AtomicU64::new(0),
            long_markers: AtomicU64::new(0),
            long_marker_ns: AtomicU64::new(0),
            marked_why: [const { AtomicU64::new(0) }; REASONS],
            other_calls: [const { AtomicU64::new(0) }; ENTRY_POINTS],
            other_ticks: [const { AtomicU64::new(0) }; ENTRY_POINTS],
            hook_ops: AtomicU64::new(0),
            hook_ticks: AtomicU64::new(0),
            paused_ops: AtomicU64::new(0),
            paused_real_ticks: AtomicU64::new(0),
            paused_hook_ticks: AtomicU64::new(0),
            steady_ops: AtomicU64::new(0),
            steady_ticks: [const { AtomicU64::new(0) }; PHASES],
            steady_marked: AtomicU64::new(0),
            steady_hook_ticks: AtomicU64::new(0),
            between_n: [const { AtomicU64::new(0) }; 2],
            between_ticks: [const { AtomicU64::new(0) }; 2],
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

/// Adds `n` to a counter of this thread's own (`shared`: the fallback counters, which any thread
/// may write, take a locked add).
#[inline]
fn bump(c: &AtomicU64, n: u64, shared: bool) {
    if shared {
        c.fetch_add(n, Ordering::Relaxed);
    } else {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

/// Every thread's counters, newest first.
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static ALL: AtomicPtr<Counters> = AtomicPtr::new(std::ptr::null_mut());
/// For a thread whose thread-locals are gone (a hook during its exit).
static SHARED: Counters = Counters::new();
static AT_EXIT: Once = Once::new();

thread_local! {
    static MINE: Cell<*const Counters> = const { Cell::new(std::ptr::null()) };
    /// This thread's last op hook's exit: (ticks, side + 1; 0: none yet).
    static LAST_EXIT: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
}

/// The longest gap between two ops' hooks counted in [`Counters::between_ticks`] (about 0.3 ms
/// at 3 GHz): longer ones are waits (a sync, the host idle), not the program's work per launch.
const BETWEEN_MAX_TICKS: u64 = 1_000_000;

/// Ends this thread's gap between ops' hooks at a hooked call that records no op (`entered`:
/// its [`start`] reading, 0 when not measuring): a gap holding other CUDA calls (a blocking copy,
/// a sync) is not the program's work between two launches, on either side.
#[inline]
pub(crate) fn break_gap(entered: u64) {
    if entered != 0 {
        break_gap_now();
    }
}

/// [`break_gap`]'s work, out of line: the hook's frame stays as small as without stats (a
/// launch from a 16 KiB thread must fit: `robust.rs`, small stacks).
#[cold]
#[inline(never)]
fn break_gap_now() {
    let _ = LAST_EXIT.try_with(|last| last.set((0, 0)));
}

/// Counts the gap from this thread's last op hook's exit to this one's entry (`entered`) when
/// both are of `side` (0 paused, 1 recording after the first pause), and notes this hook's exit
/// (now) as the last.
#[inline]
fn between(entered: u64, side: usize) {
    let exit = ticks();
    let _ = LAST_EXIT.try_with(|last| {
        let (t, s) = last.replace((exit, side + 1));
        let gap = entered.saturating_sub(t);
        if s == side + 1 && t != 0 && gap <= BETWEEN_MAX_TICKS {
            with(|c, shared| {
                bump(&c.between_n[side], 1, shared);
                bump(&c.between_ticks[side], gap, shared);
            });
        }
    });
}

/// Runs `f` with this thread's counters (created and listed at its first use) and whether they
/// are the shared fallback.
#[inline]
fn with(f: impl FnOnce(&Counters, bool)) {
    let mine = MINE
        .try_with(|m| {
            if m.get().is_null() {
                let c: &'static Counters = Box::leak(Box::new(Counters::new()));
                let mut head = ALL.load(Ordering::Acquire);
                loop {
                    c.next.store(head, Ordering::Relaxed);
                    let me = c as *const Counters as *mut Counters;
                    match ALL.compare_exchange(head, me, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => break,
                        Err(h) => head = h,
                    }
                }
                m.set(c);
            }
            m.get()
        })
        .unwrap_or(std::ptr::null());
    // SAFETY: a non-null pointer came from `Box::leak` above and is never freed.
    match unsafe { mine.as_ref() } {
        Some(c) => f(c, false),
        None => f(&SHARED, true),
    }
}

/// The sum of one counter over every thread's and the shared counters.
fn total(field: impl Fn(&Counters) -> &AtomicU64) -> u64 {
    let mut sum = field(&SHARED).load(Ordering::Relaxed);
    let mut p = ALL.load(Ordering::Acquire);
    // SAFETY: every listed pointer came from `Box::leak` and is never freed.
    while let Some(c) = unsafe { p.cast_const().as_ref() } {
        sum = sum.wrapping_add(field(c).load(Ordering::Relaxed));
        p = c.next.load(Ordering::Acquire);
    }
    sum
}

/// Whether costs are being measured.
#[inline]
pub(crate) fn enabled() -> bool {
    crate::config::get().stats
}

/// Whether each phase of a recorded op is timed (`CUDABLAME_STATS=on`, not `total`).
#[inline]
pub(crate) fn phases_enabled() -> bool {
    let c = crate::config::get();
    c.stats && c.stats_phases
}

/// A tick reading that starts a phase timed inside another ([`Phase::Stack`]), or 0 when
/// phases are not timed; [`add`] then counts nothing.
#[inline]
pub(crate) fn phase_start() -> u64 {
    if phases_enabled() {
        ticks().max(1)
    } else {
        0
    }
}

/// `(ticks, CLOCK_MONOTONIC ns)` at the first [`start`]: the base of the tick-to-ns scale.
static BASE_TICKS: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);

/// A tick reading when measuring (never 0), else 0 (no reading).
#[inline]
pub(crate) fn start() -> u64 {
    if !enabled() {
        return 0;
    }
    let t = ticks().max(1);
    if BASE_TICKS.load(Ordering::Relaxed) == 0 {
        BASE_NS.store(monotonic_ns(), Ordering::Relaxed);
        BASE_TICKS.store(t, Ordering::Relaxed);
    }
    t
}

/// Adds the ticks since `started` (a [`start`] reading) to `phase`.
#[inline]
pub(crate) fn add(phase: Phase, started: u64) {
    if started != 0 {
        let n = ticks().saturating_sub(started);
        let steady = super::ever_paused();
        with(|c, shared| {
            bump(&c.ticks[phase as usize], n, shared);
            if steady {
                bump(&c.steady_ticks[phase as usize], n, shared);
            }
        });
    }
}

/// ns per tick, from the ticks and the monotonic clock since the first [`start`] (1 where they
/// cannot tell).
fn ns_per_tick() -> f64 {
    let (t0, n0) = (
        BASE_TICKS.load(Ordering::Relaxed),
        BASE_NS.load(Ordering::Relaxed),
    );
    let (dt, dn) = (
        ticks().saturating_sub(t0),
        monotonic_ns().saturating_sub(n0),
    );
    if t0 == 0 || dt == 0 || dn == 0 {
        1.0
    } else {
        dn as f64 / dt as f64
    }
}

/// The phases of one recorded op, timed on the launching thread: each [`lap`](Self::lap) ends
/// one phase and starts the next (one tick reading a phase), and [`finish`](Self::finish) adds
/// them all to the thread's counters at once (one thread-local lookup per op). Inert (no reading)
/// when not measuring; with `TIMED` false (the common path, `CUDABLAME_STATS` off: see
/// `safety::gate`) every method compiles to nothing, so the recording path carries no timing
/// code at all.
pub(crate) struct Timeline<const TIMED: bool = true> {
    /// The last reading (0: not measuring).
    last: u64,
    /// Each phase is timed (`CUDABLAME_STATS=on`); else (`total`) only the real call's edges
    /// are read and everything else counts as [`Phase::Rest`].
    phases: bool,
    ticks: [u64; PHASES],
}

impl<const TIMED: bool> Timeline<TIMED> {
    /// Starts timing an op from the hook's entry, `entered` (its [`start`] reading; 0: not
    /// measuring): the hook's prelude (describing the call, the pause and reentry checks) is
    /// cudablame's own time too, counted as [`Phase::Rest`].
    #[inline]
    pub(crate) fn from(entered: u64) -> Self {
        Timeline {
            last: if TIMED { entered } else { 0 },
            phases: TIMED && entered != 0 && phases_enabled(),
            ticks: [0; PHASES],
        }
    }

    /// Ends `phase`: the ticks since the last lap (or the start) are its. Reads nothing unless
    /// phases are timed (`CUDABLAME_STATS=on`).
    #[inline]
    pub(crate) fn lap(&mut self, phase: Phase) {
        if TIMED && self.phases {
            self.read(phase);
        }
    }

    /// Ends `phase`, the last one before the real call: read whenever measuring (the real
    /// call's start), its ticks counted as [`Phase::Rest`] unless phases are timed.
    #[inline]
    pub(crate) fn lap_before_real(&mut self, phase: Phase) {
        self.read(if self.phases { phase } else { Phase::Rest });
    }

    /// Ends the real call (read whenever measuring).
    #[inline]
    pub(crate) fn lap_real(&mut self) {
        self.read(Phase::RealCall);
    }

    /// One reading, ending `phase` (none when not measuring).
    #[inline]
    fn read(&mut self, phase: Phase) {
        if TIMED && self.last != 0 {
            let t = ticks();
            self.ticks[phase as usize] += t.saturating_sub(self.last);
            self.last = t;
        }
    }

    /// Ends the op (the time since the last lap is [`Phase::Rest`]) and counts it with the stack
    /// bytes it copied, its Python frames and whether it got a progress marker.
    #[inline(always)]
    pub(crate) fn finish(self, stack_bytes: usize, python_frames: usize, marked: bool) {
        if TIMED && self.last != 0 {
            self.count(stack_bytes, python_frames, marked);
        }
    }

    /// [`finish`](Self::finish) when measuring (out of line: not the hot path's code).
    #[inline(never)]
    fn count(mut self, stack_bytes: usize, python_frames: usize, marked: bool) {
        self.read(Phase::Rest);
        print_at_exit_once();
        let steady = super::ever_paused();
        with(|c, shared| {
            for (counter, &t) in c.ticks.iter().zip(&self.ticks) {
                if t != 0 {
                    bump(counter, t, shared);
                }
            }
            if steady {
                for (counter, &t) in c.steady_ticks.iter().zip(&self.ticks) {
                    if t != 0 {
                        bump(counter, t, shared);
                    }
                }
                bump(&c.steady_ops, 1, shared);
                bump(&c.steady_marked, marked as u64, shared);
            }
            bump(&c.ops, 1, shared);
            bump(&c.stack_bytes, stack_bytes as u64, shared);
            bump(&c.python_frames, python_frames as u64, shared);
            bump(&c.marked, marked as u64, shared);
        });
    }
}

impl Timeline<false> {
    /// A timeline that times nothing (an op whose cost is not counted: a blocking copy).
    pub(crate) fn none() -> Self {
        Timeline::from(0)
    }
}

/// The timing of one hooked call that records no op (`interpose::hook`: a sync, a query, an
/// event or memory call): cudablame's own ticks before and after the real call, counted per
/// entry point. Inert when not measuring.
pub(crate) struct OtherCall {
    /// The hook's start (0: not measuring).
    started: u64,
    /// Ticks in the real call.
    real_ticks: u64,
}

impl OtherCall {
    /// Times the call from the hook's entry, `entered` (its [`start`] reading; 0: not
    /// measuring).
    #[inline]
    pub(crate) fn from(entered: u64) -> OtherCall {
        OtherCall {
            started: entered,
            real_ticks: 0,
        }
    }

    /// Runs the real call `f`, its ticks left out of cudablame's.
    #[inline]
    pub(crate) fn real<T>(&mut self, f: impl FnOnce() -> T) -> T {
        if self.started == 0 {
            return f();
        }
        let t0 = ticks();
        let r = f();
        self.real_ticks = ticks().saturating_sub(t0);
        r
    }

    /// Counts the call of `ep` (at the hook's exit), and ends this thread's gap between ops'
    /// hooks ([`break_gap`]).
    #[inline]
    pub(crate) fn finish(self, ep: crate::cuda::entry_points::EntryPoint) {
        if self.started == 0 {
            return;
        }
        break_gap_now();
        let own = ticks()
            .saturating_sub(self.started)
            .saturating_sub(self.real_ticks);
        print_at_exit_once();
        with(|c, shared| {
            bump(&c.other_calls[ep as usize], 1, shared);
            bump(&c.other_ticks[ep as usize], own, shared);
        });
    }
}

/// Counts a recorded op's whole hook, from `entered` (a [`start`] reading at the hook's entry;
/// 0: not measuring) to now.
#[inline]
pub(crate) fn whole_hook(entered: u64) {
    if entered != 0 {
        whole_hook_now(entered);
    }
}

/// [`whole_hook`]'s work, out of line (as [`break_gap_now`]).
#[cold]
#[inline(never)]
fn whole_hook_now(entered: u64) {
    let n = ticks().saturating_sub(entered);
    let steady = super::ever_paused();
    with(|c, shared| {
        bump(&c.hook_ops, 1, shared);
        bump(&c.hook_ticks, n, shared);
        if steady {
            bump(&c.steady_hook_ticks, n, shared);
        }
    });
    if steady {
        between(entered, 1);
    }
}

/// Runs the real call `f` of an op that would be recorded while paused, counting it, its real
/// call's ticks and its whole hook's from `entered` (a [`start`] reading; 0: not measuring,
/// then only `f` runs).
#[inline]
pub(crate) fn paused_op<T>(entered: u64, f: impl FnOnce() -> T) -> T {
    if entered == 0 {
        return f();
    }
    paused_op_now(entered, f)
}

/// [`paused_op`]'s measured form, out of line (as [`break_gap_now`]).
#[cold]
#[inline(never)]
fn paused_op_now<T>(entered: u64, f: impl FnOnce() -> T) -> T {
    let t0 = ticks();
    let r = f();
    let t1 = ticks();
    print_at_exit_once();
    with(|c, shared| {
        bump(&c.paused_ops, 1, shared);
        bump(&c.paused_real_ticks, t1.saturating_sub(t0), shared);
        bump(&c.paused_hook_ticks, t1.saturating_sub(entered), shared);
    });
    between(entered, 0);
    r
}

/// A marker write at least this long (ns) is counted apart: a warm write takes 1.0 to 1.5 µs
/// of host time on the H200 hosts, but one whose driver path the program's own work evicted
/// takes 4 to 7 µs with the GPU idle (`cuda-samples/bench/marker_kinds.cu`, 2 MiB of other
/// writes between launches: 6.5 µs median; twenty-fourth session), and one behind a full
/// launch queue waits for room. The count does not tell the two apart.
pub(crate) const LONG_MARKER_NS: u64 = 4_000;

/// Runs one marker write `write`, counting it apart when it took at least [`LONG_MARKER_NS`]
/// (the monotonic clock, read only when measuring).
#[inline]
pub(crate) fn marker_write(write: impl FnOnce() -> bool) -> bool {
    if !phases_enabled() {
        return write();
    }
    let t0 = monotonic_ns();
    let taken = write();
    let ns = monotonic_ns().saturating_sub(t0);
    if ns >= LONG_MARKER_NS {
        with(|c, shared| {
            bump(&c.long_markers, 1, shared);
            bump(&c.long_marker_ns, ns, shared);
        });
    }
    taken
}

/// Counts one stack copy unwound on the launching thread because its op left the copies
/// unproven (`record::ring`).
#[inline]
pub(crate) fn held_unwind() {
    if enabled() {
        with(|c, shared| bump(&c.held_unwinds, 1, shared));
    }
}

/// The gap (ns) of the stream whose budget marker was written last, as its marker cost
/// stretched it (`policy::Marks::gap_ns`); 0: none yet. Kept only when measuring.
static MARKER_GAP_NS: AtomicU64 = AtomicU64::new(0);

/// Notes `gap_ns`, the marker gap of a stream that just wrote a marker the budget asked for,
/// for the stats line (`marker gap now G us`).
#[inline]
pub(crate) fn marker_gap(gap_ns: u64) {
    if enabled() {
        MARKER_GAP_NS.store(gap_ns, Ordering::Relaxed);
    }
}

/// Counts one marker the driver took, by the policy's reason for it.
#[inline]
pub(crate) fn marked_because(why: super::policy::Why) {
    if enabled() {
        // A marker before a wait (`record::sync`) marks a recorded op outside that op's own
        // hook: counted as marked here, so that `marked N` is the sum of its reasons.
        let wait = why == super::policy::Why::Wait;
        let steady = wait && super::ever_paused();
        with(|c, shared| {
            bump(&c.marked_why[why as usize], 1, shared);
            bump(&c.marked, wait as u64, shared);
            bump(&c.steady_marked, steady as u64, shared);
        });
    }
}

/// Counts one stack copy moved into its stream's held copies (instead of being unwound) because
/// its op left the newest copies unproven (`record::ring`).
#[inline]
pub(crate) fn held_copy() {
    if enabled() {
        with(|c, shared| bump(&c.held_copies, 1, shared));
    }
}

fn monotonic_ns() -> u64 {
    crate::clock::system_ns(libc::CLOCK_MONOTONIC)
}

/// Mean ns per op of each phase, over `ops` ops, from the tick counters `ticks` picks (the
/// stack copy, timed inside the ring push, taken out of `record`).
struct Means {
    python: u64,
    lookup: u64,
    lock: u64,
    real: u64,
    record: u64,
    stack: u64,
    marker: u64,
    rest: u64,
}

impl Means {
    fn of(ops: u64, scale: f64, ticks: impl Fn(&Counters) -> &[AtomicU64; PHASES]) -> Means {
        let ns = |p: Phase| (total(|c| &ticks(c)[p as usize]) as f64 * scale) as u64 / ops.max(1);
        let stack = ns(Phase::Stack);
        Means {
            python: ns(Phase::Python),
            lookup: ns(Phase::Lookup),
            lock: ns(Phase::Lock),
            real: ns(Phase::RealCall),
            record: ns(Phase::Record).saturating_sub(stack),
            stack,
            marker: ns(Phase::Marker),
            rest: ns(Phase::Rest),
        }
    }
}

/// The stats line: mean ns per recorded op of each phase (`total T = real call R + cudablame C
/// (...)`: C is everything but the real call), how many ops got a progress marker (`marked N of M
/// ops (every E, first F, count C, copy P, gap G, idle I, wait W)`: markers by the policy's
/// reason), how many marker writes took over 4 µs ([`LONG_MARKER_NS`]), how many stack copies
/// were held as copies (`held stack copies N`) and how many were unwound while recording (`held
/// stacks unwound N`); then the hooked calls that record no op (`other calls N, cudablame ns
/// per call X (ENTRY POINT count x ns, ...)`: the 8 entry points that took most of cudablame's
/// time in them); then each recorded op's whole hook, entry to exit (`whole hook: N recorded ops,
/// H ns each`), and the ops that would be recorded but ran while paused, with their real call
/// and whole hook (`paused: P ops, real call R ns, whole hook W ns`: in a paired benchmark
/// the same process's baseline), and the same for the ops recorded after the first pause
/// (`recorded after the first pause: S ops, real call R ns, cudablame C ns (native stack copy
/// X, python Y, marker Z, other O), marked M, whole hook W ns`:
/// the other side of that comparison, the warm-up left out), then the launching thread's time
/// between two ops' hooks on each side (`between ops' hooks: paused P ns (N gaps), recording R
/// ns (M gaps)`: what recording costs the program's own work outside the hook), and what one
/// tick reading costs (`one tick reading T ns`: each timed phase carries about one), and last
/// the marker gap of the stream whose budget marker was written last (`marker gap now G us`:
/// the configured gap, stretched by that stream's marker cost; 0: no budget marker yet, and
/// always under `every` or `off`). With `CUDABLAME_STATS=total` both parenthesised splits read `(phases not timed:
/// CUDABLAME_STATS=total)`: C is then the hook's own time with only the real call's edges read.
/// The integration tests and `scripts/bench.sh` read them.
pub(crate) fn line() -> String {
    let n_ops = total(|c| &c.ops);
    let ops = n_ops.max(1);
    let scale = ns_per_tick();
    let Means {
        python,
        lookup,
        lock,
        real,
        record,
        stack,
        marker,
        rest,
    } = Means::of(ops, scale, |c| &c.ticks);
    let own = python + lookup + lock + record + stack + marker + rest;
    let other = lookup + lock + record + rest;
    let per = |n: u64| n as f64 / ops as f64;
    let why = (super::policy::WHY_NAMES.iter().enumerate())
        .map(|(i, name)| format!("{name} {}", total(|c| &c.marked_why[i])))
        .collect::<Vec<_>>()
        .join(", ");
    let long = total(|c| &c.long_markers);
    let mut by_ep: Vec<(u64, u64, &str)> = crate::cuda::entry_points::EntryPoint::ALL
        .iter()
        .map(|&ep| {
            let i = ep as usize;
            let n = total(|c| &c.other_calls[i]);
            let t = (total(|c| &c.other_ticks[i]) as f64 * scale) as u64;
            (t, n, ep.name())
        })
        .filter(|&(_, n, _)| n > 0)
        .collect();
    let (other_n, other_ns) = by_ep.iter().fold((0, 0), |(n, t), e| (n + e.1, t + e.0));
    by_ep.sort_by_key(|e| std::cmp::Reverse(e.0));
    let others: Vec<String> = (by_ep.iter().take(8))
        .map(|&(t, n, name)| format!("{name} {n} x {}", t / n.max(1)))
        .collect();
    let mean = |t: u64, n: u64| (t as f64 * scale) as u64 / n.max(1);
    let hook_ops = total(|c| &c.hook_ops);
    let paused = total(|c| &c.paused_ops);
    let steady = total(|c| &c.steady_ops);
    let st = Means::of(steady, scale, |c| &c.steady_ticks);
    let st_other = st.lookup + st.lock + st.record + st.rest;
    let st_own = st.python + st.stack + st.marker + st_other;
    let (split, st_split) = if phases_enabled() {
        (
            format!(
                "native stack copy {stack} for {:.0} bytes; python {python} for {:.1} frames; \
                 marker {marker}, of which {} in {long} writes over 4 us (a cold driver path or \
                 a full queue); other \
                 {other}: stream and kernel lookup {lookup}, ring lock {lock}, ring push \
                 {record}, entry and exit {rest}",
                per(total(|c| &c.stack_bytes)),
                per(total(|c| &c.python_frames)),
                total(|c| &c.long_marker_ns) / ops,
            ),
            format!(
                "native stack copy {}, python {}, marker {}, other {st_other}",
                st.stack, st.python, st.marker
            ),
        )
    } else {
        let not = "phases not timed: CUDABLAME_STATS=total".to_string();
        (not.clone(), not)
    };
    format!(
        "cudablame stats: {n_ops} recorded ops; mean ns per op: total {} = real call {real} + \
         cudablame {own} ({split}); marked {} of {n_ops} ops ({why}); held stacks unwound {}; \
         held stack copies {}; launch sites {} ({} launches by another native path, {} past the thread's recent sites); other \
         calls {}, cudablame ns per call {} ({}); whole hook: \
         {hook_ops} recorded ops, {} ns each; paused: {paused} ops, real call {} ns, whole hook {} \
         ns; recorded after the first pause: {steady} ops, real call {} ns, cudablame {st_own} ns \
         ({st_split}), marked {}, whole hook {} ns; between ops' hooks: paused {} ns ({} gaps), \
         recording {} ns ({} gaps); one tick reading {:.1} ns; marker gap now {} us",
        real + own,
        total(|c| &c.marked),
        total(|c| &c.held_unwinds),
        total(|c| &c.held_copies),
        crate::stack::sites::count().0,
        crate::stack::sites::count().1,
        crate::stack::sites::count().2,
        other_n,
        other_ns / other_n.max(1),
        others.join(", "),
        mean(total(|c| &c.hook_ticks), hook_ops),
        mean(total(|c| &c.paused_real_ticks), paused),
        mean(total(|c| &c.paused_hook_ticks), paused),
        st.real,
        total(|c| &c.steady_marked),
        mean(total(|c| &c.steady_hook_ticks), steady),
        mean(total(|c| &c.between_ticks[0]), total(|c| &c.between_n[0])),
        total(|c| &c.between_n[0]),
        mean(total(|c| &c.between_ticks[1]), total(|c| &c.between_n[1])),
        total(|c| &c.between_n[1]),
        tick_reading_ns(scale),
        MARKER_GAP_NS.load(Ordering::Relaxed) / 1000,
    )
}

/// What one tick reading costs (ns, the mean of 1,000 back to back at exit, `scale` ns per
/// tick): every timed phase carries about one, so `CUDABLAME_STATS=on`'s own time holds about
/// ten per op that an unmeasured hook does not pay, and `total`'s about two.
fn tick_reading_ns(scale: f64) -> f64 {
    const N: u64 = 1000;
    let t0 = ticks();
    let mut last = t0;
    for _ in 0..N {
        last = std::hint::black_box(ticks());
    }
    last.saturating_sub(t0) as f64 * scale / N as f64
}

/// The process that registered [`print_at_exit`] (0: none yet).
static AT_EXIT_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Registers [`print_at_exit`] at the first counted call (a recorded op or another call).
#[inline]
fn print_at_exit_once() {
    AT_EXIT.call_once(|| {
        // SAFETY: getpid cannot fail.
        AT_EXIT_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
        // SAFETY: registers a plain extern "C" function with no arguments.
        unsafe { libc::atexit(print_at_exit) };
    });
}

/// Prints the stats line in the process that registered it only: a forked child inherits the
/// handler and the parent's counters (found by a fresh-user trial: every child that left with
/// `exit` printed the parent's numbers again). A child's own calls are therefore not printed.
extern "C" fn print_at_exit() {
    // SAFETY: getpid cannot fail.
    if unsafe { libc::getpid() } != AT_EXIT_PID.load(Ordering::Relaxed) {
        return;
    }
    let _ = std::panic::catch_unwind(|| crate::safety::say(&line()));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's gap counts of `side`.
    fn gaps(side: usize) -> u64 {
        let mut n = 0;
        with(|c, _| n = c.between_n[side].load(Ordering::Relaxed));
        n
    }

    #[test]
    fn a_gap_between_ops_with_another_call_in_it_is_not_counted() {
        let before = (gaps(0), gaps(1));
        between(ticks().max(1), 0); // the first op: no gap before it
        between(ticks().max(1), 0); // a gap
        between(ticks().max(1), 0); // a gap
        break_gap(ticks().max(1)); // a sync between two ops
        between(ticks().max(1), 0); // no gap: the sync was in it
        between(ticks().max(1), 0); // a gap
        between(ticks().max(1), 1); // the other side: no gap across sides
        between(ticks().max(1), 1); // a gap of that side
        assert_eq!((gaps(0), gaps(1)), (before.0 + 3, before.1 + 1));
        // Not measuring (0): nothing is broken or counted.
        break_gap(0);
        between(ticks().max(1), 1);
        assert_eq!(gaps(1), before.1 + 2);
    }
}
