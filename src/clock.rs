//! The op clock: wall-clock ns (`CLOCK_REALTIME`) for every op's launch and return time, read
//! from the time-stamp counter between anchors instead of calling `clock_gettime` twice per op.
//!
//! Why: on the H200 machine (KVM guest, clocksource `tsc`) one `clock_gettime(CLOCK_REALTIME)`
//! costs 35 ns back to back but **270-345 ns** when 2 MiB of other memory was written since the
//! last call (its vDSO code and the kernel's time data evicted, as by a PyTorch step's own work
//! between two launches), against 40 ns for an `rdtsc` pair in the same state
//! (`cuda-samples/bench/ctxbench.c`, 2026-12-03). The hot path reads the clock twice per op
//! (launch and return).
//!
//! How: a process-wide anchor `(tsc, ns, ns per tick)` in one cache line, published under a
//! sequence lock. [`now_ns`] is `ns + (rdtsc - tsc) * scale` for the anchor's span; past that,
//! or before the first calibration, one call reads `CLOCK_REALTIME` itself (bracketed by two
//! counter readings, so that a thread preempted inside the pair cannot make a wrong anchor) and
//! makes the next anchor ([`next_anchor`]): the first after [`CALIBRATE_NS`], each later one
//! with the scale measured over the whole time since the previous one, used for at most four
//! times that baseline and [`ANCHOR_NS`]. A re-anchor continues the running clock and slews it
//! onto `CLOCK_REALTIME` over its span (no step back), unless the two are more than [`STEP_NS`]
//! apart (the system time was set): then it steps, as `CLOCK_REALTIME` does (the marker policy
//! takes a clock that stepped back as a long gap). The error against `CLOCK_REALTIME` stays
//! within a few µs in the first second and falls as the baselines grow. Used only where the
//! kernel's own clocksource is the TSC
//! (`/sys/devices/system/clocksource/clocksource0/current_clocksource` is `tsc`: the kernel
//! found it invariant and synchronized across CPUs) on x86-64; elsewhere every read is
//! `clock_gettime`. Lock-free and async-signal-safe: a reader that meets an anchor being
//! written, or a writer that meets another, reads `CLOCK_REALTIME` instead.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};

/// Shortest baseline of a scale (ns): the first anchor comes this long after the first reading.
pub(crate) const CALIBRATE_NS: u64 = 50_000_000;
/// Longest time an anchor is used for (ns) before the next reading re-anchors.
pub(crate) const ANCHOR_NS: u64 = 1_000_000_000;

/// The anchor, in one cache line. `seq` odd: being written; 0: none yet.
#[repr(C, align(64))]
struct Anchor {
    seq: AtomicU64,
    tsc: AtomicU64,
    ns: AtomicU64,
    /// ns per tick, as a 32.32 fixed-point number.
    scale: AtomicU64,
    /// Ticks after `tsc` the anchor is used for.
    span: AtomicU64,
}

#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static ANCHOR: Anchor = Anchor {
    seq: AtomicU64::new(0),
    tsc: AtomicU64::new(0),
    ns: AtomicU64::new(0),
    scale: AtomicU64::new(0),
    span: AtomicU64::new(0),
};

/// [`MODE`]: not decided yet, the TSC is used, or not.
const UNDECIDED: u8 = 0;
const TSC: u8 = 1;
const SYSTEM: u8 = 2;
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);
/// Held by the one thread (re-)anchoring.
static WRITING: AtomicBool = AtomicBool::new(false);

/// Wall-clock time in ns since the Unix epoch (`CLOCK_REALTIME`, comparable across processes of
/// one host to within the anchor's error, see the module doc); 0 if the system clock fails.
#[inline]
pub(crate) fn now_ns() -> u64 {
    if let Some(a) = anchored() {
        // Before the anchor (another CPU's counter a little behind) wraps to a huge value.
        let d = ticks().wrapping_sub(a.tsc);
        if d < a.span {
            return a.ns + ((d as u128 * a.scale as u128) >> 32) as u64;
        }
    }
    slow_now_ns()
}

/// The published anchor, read under its sequence lock; `None` before the first one, or while
/// one is being written.
#[inline]
fn anchored() -> Option<Anchored> {
    let seq = ANCHOR.seq.load(Ordering::Acquire);
    if seq == 0 || seq & 1 != 0 {
        return None;
    }
    let a = Anchored {
        tsc: ANCHOR.tsc.load(Ordering::Relaxed),
        ns: ANCHOR.ns.load(Ordering::Relaxed),
        scale: ANCHOR.scale.load(Ordering::Relaxed),
        span: ANCHOR.span.load(Ordering::Relaxed),
    };
    fence(Ordering::Acquire);
    (ANCHOR.seq.load(Ordering::Relaxed) == seq).then_some(a)
}

/// A tick reading: the time-stamp counter on x86-64, else the monotonic clock in ns. Ticks are
/// only compared with ticks (`record::cost` scales them to ns by its own calibration).
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` reads the time-stamp counter; no memory access, available on every
        // x86-64 processor.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    system_ns(libc::CLOCK_MONOTONIC)
}

/// `clock_gettime(clock)` in ns; 0 if it fails.
pub(crate) fn system_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer; clock_gettime is async-signal-safe and takes no lock.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// No usable anchor: `CLOCK_REALTIME` itself, and (for one thread at a time) the next anchor.
#[cold]
fn slow_now_ns() -> u64 {
    if MODE.load(Ordering::Acquire) == SYSTEM {
        return system_ns(libc::CLOCK_REALTIME);
    }
    // The system reading bracketed by two counter readings: the pair is (midpoint, ns), good to
    // half the bracket (a thread preempted inside it gets a wide bracket, not a wrong anchor).
    let t0 = ticks();
    let ns = system_ns(libc::CLOCK_REALTIME);
    let t1 = ticks();
    if ns == 0 {
        return ns;
    }
    if WRITING
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return ns;
    }
    let here = Point {
        tsc: t0 / 2 + t1 / 2,
        ns,
        width: t1.saturating_sub(t0),
    };
    // SAFETY: only the thread holding `WRITING` (this one, until the store below) touches `LAST`.
    let last = unsafe { &mut *LAST.0.get() };
    if MODE.load(Ordering::Acquire) == UNDECIDED {
        *last = here;
        let mode = if tsc_is_the_clocksource() {
            TSC
        } else {
            SYSTEM
        };
        MODE.store(mode, Ordering::Release);
    } else if let Some(next) = next_anchor(*last, here, anchored()) {
        publish(next);
        *last = here;
    } else if here.width < last.width && ANCHOR.seq.load(Ordering::Relaxed) == 0 {
        // Not calibrated yet and this reading is tighter than the first: start over from it.
        *last = here;
    }
    WRITING.store(false, Ordering::Release);
    ns
}

/// One `CLOCK_REALTIME` reading and the counter's: `tsc` at `ns`, within `width` ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Point {
    pub(crate) tsc: u64,
    pub(crate) ns: u64,
    pub(crate) width: u64,
}

/// The last system reading an anchor was made from (or the calibration's first), owned by the
/// thread holding [`WRITING`].
struct LastPoint(std::cell::UnsafeCell<Point>);
// SAFETY: accessed only under `WRITING` (see `slow_now_ns`).
unsafe impl Sync for LastPoint {}
static LAST: LastPoint = LastPoint(std::cell::UnsafeCell::new(Point {
    tsc: 0,
    ns: 0,
    width: 0,
}));

/// An anchor: from counter value `tsc` (ns `ns`) on, `scale` (ns per tick, 32.32) for `span`
/// ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Anchored {
    pub(crate) tsc: u64,
    pub(crate) ns: u64,
    pub(crate) scale: u64,
    pub(crate) span: u64,
}

impl Anchored {
    /// The clock at counter value `tsc` (at or after the anchor).
    fn at(&self, tsc: u64) -> u64 {
        self.ns + ((tsc.saturating_sub(self.tsc) as u128 * self.scale as u128) >> 32) as u64
    }
}

/// Bracket widths accepted for an anchor's readings (ns): half of it is the reading's error.
pub(crate) const MAX_WIDTH_NS: u64 = 1_000;
/// An error of the running clock past which a re-anchor steps to the system clock (the system
/// time was set) instead of slewing to it over the next anchor.
pub(crate) const STEP_NS: u64 = 50_000;

/// The anchor to publish at reading `here`, given the previous reading `last` and the running
/// anchor `now` (none: not calibrated yet); `None` while the baseline is shorter than
/// [`CALIBRATE_NS`], either reading's bracket is wider than [`MAX_WIDTH_NS`], or a clock went
/// back. The scale is measured over the baseline; the anchor continues the running clock and
/// slews it onto the system clock over its span (used for at most 4 baselines, at most
/// [`ANCHOR_NS`]), unless it is off by more than [`STEP_NS`]: then it steps.
pub(crate) fn next_anchor(last: Point, here: Point, now: Option<Anchored>) -> Option<Anchored> {
    let dn = here.ns.checked_sub(last.ns)?;
    let dt = here.tsc.checked_sub(last.tsc)?;
    if dn < CALIBRATE_NS || dt == 0 {
        return None;
    }
    let scale = (((dn as u128) << 32) / dt as u128).min(u64::MAX as u128) as u64;
    let ns_of = |ticks: u64| ((ticks as u128 * scale as u128) >> 32) as u64;
    if scale == 0 || ns_of(last.width.max(here.width)) > MAX_WIDTH_NS {
        return None;
    }
    let span_ns = ANCHOR_NS.min(dn.saturating_mul(4));
    let span = (((span_ns as u128) << 32) / scale as u128).min(u64::MAX as u128) as u64;
    let (ns, scale) = match now.map(|a| a.at(here.tsc)) {
        Some(running) if running.abs_diff(here.ns) <= STEP_NS => {
            // Continue at `running` and reach the system clock after `span_ns`:
            // ns per tick = (span_ns + here.ns - running) / span.
            let target = (span_ns + here.ns).saturating_sub(running);
            let slewed = (((target as u128) << 32) / span.max(1) as u128).min(u64::MAX as u128);
            (running, slewed as u64)
        }
        _ => (here.ns, scale),
    };
    Some(Anchored {
        tsc: here.tsc,
        ns,
        scale,
        span,
    })
}

/// Writes the anchor under its sequence lock (caller holds [`WRITING`]).
fn publish(a: Anchored) {
    let seq = ANCHOR.seq.load(Ordering::Relaxed);
    ANCHOR.seq.store(seq + 1, Ordering::Relaxed);
    fence(Ordering::Release);
    ANCHOR.tsc.store(a.tsc, Ordering::Relaxed);
    ANCHOR.ns.store(a.ns, Ordering::Relaxed);
    ANCHOR.scale.store(a.scale, Ordering::Relaxed);
    ANCHOR.span.store(a.span, Ordering::Relaxed);
    ANCHOR.seq.store(seq + 2, Ordering::Release);
}

/// Whether the kernel's current clocksource is the TSC (x86-64 only): then the counter is
/// invariant and synchronized across CPUs, as the kernel's own `CLOCK_REALTIME` relies on.
/// Read once with plain system calls (no allocation).
fn tsc_is_the_clocksource() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    const PATH: &[u8] = b"/sys/devices/system/clocksource/clocksource0/current_clocksource\0";
    let mut buf = [0u8; 16];
    // SAFETY: a NUL-terminated path; `buf` has room for what is read; the fd is closed.
    let n = unsafe {
        let fd = libc::open(PATH.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    n >= 3 && buf[..n as usize].trim_ascii() == b"tsc"
}

/// In a forked child (the `pthread_atfork` handler): the anchor stays good (the counter and the
/// system clock go on after `fork`), but the writer's flag may be held by a parent thread that
/// does not exist in the child, which would leave every later re-anchor to no one.
pub(crate) fn after_fork() {
    WRITING.store(false, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    const GHZ3: u64 = 3; // ticks per ns in these tests

    fn point(ns: u64, width: u64) -> Point {
        Point {
            tsc: ns * GHZ3,
            ns,
            width,
        }
    }

    #[test]
    fn calibration_needs_a_long_baseline_and_tight_readings() {
        let first = point(1_000_000, 90);
        // 3 GHz: 1/3 ns per tick, used for 4 baselines.
        let a = next_anchor(first, point(1_000_000 + CALIBRATE_NS, 90), None).unwrap();
        assert_eq!(a.scale, ((1u128 << 32) / 3) as u64);
        assert_eq!(
            (a.tsc, a.ns),
            ((1_000_000 + CALIBRATE_NS) * 3, 1_000_000 + CALIBRATE_NS)
        );
        assert!((4 * CALIBRATE_NS * 3).abs_diff(a.span) < 10, "{}", a.span);
        // Too short a baseline, a clock gone back, a reading preempted (5 us bracket): none.
        assert_eq!(
            next_anchor(first, point(1_000_000 + CALIBRATE_NS / 2, 90), None),
            None
        );
        assert_eq!(next_anchor(point(CALIBRATE_NS * 3, 90), first, None), None);
        assert_eq!(
            next_anchor(first, point(2 * CALIBRATE_NS, 15_000), None),
            None
        );
    }

    #[test]
    fn a_reanchor_continues_the_clock_and_slews_onto_the_system_clock() {
        let first = point(0, 30);
        let a = next_anchor(first, point(CALIBRATE_NS, 30), None).unwrap();
        // The running clock is 2 us ahead of the system clock at the next reading (the system
        // clock's rate differs from the first scale's): the new anchor starts where the running
        // clock is (no step back) and meets the system clock at the end of its span.
        let mut here = point(CALIBRATE_NS * 3, 30);
        here.ns -= 2_000;
        let running = a.at(here.tsc);
        let b = next_anchor(point(CALIBRATE_NS, 30), here, Some(a)).unwrap();
        assert_eq!((b.tsc, b.ns), (here.tsc, running));
        let end = b.at(b.tsc + b.span);
        let span_ns = 4 * (here.ns - CALIBRATE_NS);
        assert!(
            end.abs_diff(here.ns + span_ns) < 10,
            "{end} vs {}",
            here.ns + span_ns
        );
        assert!(b.scale < a.scale, "slower to lose the 2 us");
        // Off by more than STEP_NS (the system time was set): the anchor steps to it.
        let mut set = point(CALIBRATE_NS * 3, 30);
        set.ns += 10 * STEP_NS;
        let c = next_anchor(point(CALIBRATE_NS, 30), set, Some(a)).unwrap();
        assert_eq!(c.ns, set.ns);
    }

    #[test]
    fn the_clock_follows_the_system_clock() {
        // Whatever the machine's clocksource: each reading lies between the system readings
        // around it (to within the anchor's error, 50 us here), and one thread's readings do
        // not go back.
        let mut last = 0;
        let start = system_ns(libc::CLOCK_REALTIME);
        while system_ns(libc::CLOCK_REALTIME) < start + 3 * CALIBRATE_NS {
            let before = system_ns(libc::CLOCK_REALTIME);
            let ours = now_ns();
            let after = system_ns(libc::CLOCK_REALTIME);
            assert!(
                ours + 50_000 >= before && ours <= after + 50_000,
                "{before} {ours} {after}"
            );
            assert!(ours + 1_000 >= last, "{ours} after {last}");
            last = ours;
        }
        if MODE.load(Ordering::Relaxed) == TSC {
            assert_ne!(
                ANCHOR.seq.load(Ordering::Relaxed),
                0,
                "anchored after calibration"
            );
            // Anchored: a reading is the counter's, not the system call's (ns per reading,
            // printed for whoever runs the test with --nocapture).
            let t0 = std::time::Instant::now();
            for _ in 0..100_000 {
                std::hint::black_box(now_ns());
            }
            eprintln!("now_ns: {:?} per reading", t0.elapsed() / 100_000);
        }
    }
}
