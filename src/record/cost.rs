//! What recording costs, phase by phase (`CUDABLAME_STATS=on`): host nanoseconds spent per
//! recorded op in native stack capture, Python frames, the real call, the progress marker and the
//! rest of cudablame's bookkeeping, summed over all threads and printed as one line on stderr when
//! the process exits. Off by default: then every function here is one relaxed load of the
//! configuration and nothing else.
//!
//! Phases are timed with the time-stamp counter (`rdtsc`, about 7 ns a reading on x86-64)
//! rather than `clock_gettime` (about 25 ns): an op takes 10 readings, and with the clock the
//! measurement itself added an estimated 150 ns (from those per-reading costs, not measured) to
//! the "other" share it reports. Ticks become ns at
//! exit, scaled by `CLOCK_MONOTONIC` over the whole run (elsewhere the clock is used directly).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// A timed part of recording one op.
#[derive(Clone, Copy)]
pub(crate) enum Phase {
    /// Native stack: the copy of the stack's top (`stack::copy`).
    Stack,
    /// Python frames (`stack::python::PythonStack::capture`).
    Python,
    /// The real driver call (the launch, copy or memset itself).
    RealCall,
    /// `cuStreamWriteValue64` of the progress marker.
    Marker,
    /// The whole hook, from entry to return.
    Total,
}

const PHASES: usize = 5;
static TICKS: [AtomicU64; PHASES] = [const { AtomicU64::new(0) }; PHASES];
static OPS: AtomicU64 = AtomicU64::new(0);
static STACK_BYTES: AtomicU64 = AtomicU64::new(0);
static PYTHON_FRAMES: AtomicU64 = AtomicU64::new(0);
static MARKED: AtomicU64 = AtomicU64::new(0);
static HELD_UNWINDS: AtomicU64 = AtomicU64::new(0);
static HELD_COPIES: AtomicU64 = AtomicU64::new(0);
/// Markers taken by the driver, by `policy::Why`.
static MARKED_WHY: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];
static AT_EXIT: Once = Once::new();

/// Whether costs are being measured.
#[inline]
pub(crate) fn enabled() -> bool {
    crate::config::get().stats
}

/// `(ticks, CLOCK_MONOTONIC ns)` at the first [`start`]: the base of the tick-to-ns scale.
static BASE_TICKS: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);

/// A tick reading: the time-stamp counter on x86-64, else the monotonic clock in ns.
#[inline]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` reads the time-stamp counter; no memory access, available on every
        // x86-64 processor.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    monotonic_ns()
}

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
        TICKS[phase as usize].fetch_add(ticks().saturating_sub(started), Ordering::Relaxed);
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

/// Counts one recorded op with the stack bytes it copied, its Python frames and whether it got a
/// progress marker.
#[inline]
pub(crate) fn op(stack_bytes: usize, python_frames: usize, marked: bool) {
    if enabled() {
        AT_EXIT.call_once(|| {
            // SAFETY: registers a plain extern "C" function with no arguments.
            unsafe { libc::atexit(print_at_exit) };
        });
        OPS.fetch_add(1, Ordering::Relaxed);
        STACK_BYTES.fetch_add(stack_bytes as u64, Ordering::Relaxed);
        PYTHON_FRAMES.fetch_add(python_frames as u64, Ordering::Relaxed);
        MARKED.fetch_add(marked as u64, Ordering::Relaxed);
    }
}

/// Counts one stack copy unwound on the launching thread because its op left the copies
/// unproven (`record::ring`).
#[inline]
pub(crate) fn held_unwind() {
    if enabled() {
        HELD_UNWINDS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts one marker the driver took, by the policy's reason for it.
#[inline]
pub(crate) fn marked_because(why: super::policy::Why) {
    if enabled() {
        MARKED_WHY[why as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts one stack copy moved into its stream's held copies (instead of being unwound) because
/// its op left the newest copies unproven (`record::ring`).
#[inline]
pub(crate) fn held_copy() {
    if enabled() {
        HELD_COPIES.fetch_add(1, Ordering::Relaxed);
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The stats line: mean ns per recorded op of each phase, how many ops got a progress marker
/// (`marked N of M ops (every E, first F, count C, copy P, gap G, idle I)`: markers by the
/// policy's reason), how many stack copies were held as copies (`held stack copies N`) and how
/// many were unwound while recording (`held stacks unwound N`); the integration tests read them.
pub(crate) fn line() -> String {
    let ops = OPS.load(Ordering::Relaxed).max(1);
    let scale = ns_per_tick();
    let ns = |p: Phase| (TICKS[p as usize].load(Ordering::Relaxed) as f64 * scale) as u64 / ops;
    let (stack, python, real, marker, total) = (
        ns(Phase::Stack),
        ns(Phase::Python),
        ns(Phase::RealCall),
        ns(Phase::Marker),
        ns(Phase::Total),
    );
    let other = total.saturating_sub(stack + python + real + marker);
    let per = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / ops as f64;
    let why = (super::policy::WHY_NAMES.iter())
        .zip(MARKED_WHY.iter())
        .map(|(name, n)| format!("{name} {}", n.load(Ordering::Relaxed)))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "cudablame stats: {} recorded ops; mean ns per op: total {total} = real call {real} + \
         cudablame {} (native stack copy {stack} for {:.0} bytes; python {python} for {:.1} frames; \
         marker {marker}; other {other}); marked {} of {} ops ({why}); held stacks unwound {}; \
         held stack copies {}",
        OPS.load(Ordering::Relaxed),
        total.saturating_sub(real),
        per(&STACK_BYTES),
        per(&PYTHON_FRAMES),
        MARKED.load(Ordering::Relaxed),
        OPS.load(Ordering::Relaxed),
        HELD_UNWINDS.load(Ordering::Relaxed),
        HELD_COPIES.load(Ordering::Relaxed),
    )
}

extern "C" fn print_at_exit() {
    let _ = std::panic::catch_unwind(|| crate::safety::say(&line()));
}
