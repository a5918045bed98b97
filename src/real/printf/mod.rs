//! Device-side assert text, captured as the driver prints it.
//!
//! On a device-side assert (710) the driver prints one line per failing thread,
//! `FILE:LINE: KERNEL: block: [x,y,z], thread: [x,y,z] Assertion `COND` failed.`, to stdout
//! through `vfprintf`, called from `libcuda.so.1` itself, before the error is returned (measured
//! on driver 580). That line names the kernel, which no API can tell after the fact.
//!
//! When cudablame first finds the driver it patches only the driver's own import slots (GOT
//! entries of its `R_X86_64_JUMP_SLOT` / `R_X86_64_GLOB_DAT` relocations) for the stdio output
//! functions that take no variable arguments (`vfprintf`, `__vfprintf_chk`, `fputs`, `puts`,
//! `fwrite`): every other module of the program keeps calling libc directly, so nothing else the
//! program prints goes through here. The replacement formats a copy of the arguments
//! (`vsnprintf` on a copy of the `va_list`, what `va_copy` does on x86-64), keeps assert lines in a
//! fixed buffer (try-lock; nothing allocated, a busy buffer drops the text), then calls the
//! function the slot held with the original arguments and returns its result: the program's
//! output is byte for byte what it was. Full RELRO is handled (the slot's page is made writable
//! for the write, then read-only again). x86-64 Linux only; elsewhere nothing is patched.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Assert lines kept (the first ones: one per failing thread, all alike but for block/thread).
pub(crate) const MAX_LINES: usize = 8;
/// Bytes kept per line (longer lines are cut).
pub(crate) const LINE_BYTES: usize = 512;

struct Buffer {
    /// Text of the line being assembled (a line may come in several calls).
    partial: [u8; LINE_BYTES],
    partial_len: usize,
    lines: [[u8; LINE_BYTES]; MAX_LINES],
    lens: [usize; MAX_LINES],
    /// When each line ended (its newline was printed), wall-clock ns (`CLOCK_REALTIME`): the
    /// report ties a line to the error it belongs to by it.
    times: [u64; MAX_LINES],
    kept: usize,
}

struct Shared {
    busy: AtomicBool,
    buf: std::cell::UnsafeCell<Buffer>,
}

// SAFETY: `buf` is only touched by the thread that set `busy` (try-lock below).
unsafe impl Sync for Shared {}

static SHARED: Shared = Shared {
    busy: AtomicBool::new(false),
    buf: std::cell::UnsafeCell::new(Buffer {
        partial: [0; LINE_BYTES],
        partial_len: 0,
        lines: [[0; LINE_BYTES]; MAX_LINES],
        lens: [0; MAX_LINES],
        times: [0; MAX_LINES],
        kept: 0,
    }),
};

/// Assert lines the driver printed, including those not kept.
static SEEN: AtomicU64 = AtomicU64::new(0);
/// Slots patched (for tests and `CUDABLAME_DEBUG`).
pub(crate) static PATCHED: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` on the buffer if no other thread holds it; `spin` tries before giving up.
fn with_buffer<T>(spin: usize, f: impl FnOnce(&mut Buffer) -> T) -> Option<T> {
    for _ in 0..spin.max(1) {
        if SHARED
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: we hold the try-lock.
            let out = f(unsafe { &mut *SHARED.buf.get() });
            SHARED.busy.store(false, Ordering::Release);
            return Some(out);
        }
        std::hint::spin_loop();
    }
    None
}

/// Whether a line is a device-side assert message.
pub(crate) fn is_assert_line(line: &[u8]) -> bool {
    contains(line, b"Assertion `") && contains(line, b"block: [")
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Feeds text the driver printed: complete lines that are asserts are kept.
pub(crate) fn feed(text: &[u8]) {
    let _ = with_buffer(64, |b| {
        for &c in text {
            if c == b'\n' {
                let line = &b.partial[..b.partial_len];
                if is_assert_line(line) {
                    SEEN.fetch_add(1, Ordering::Relaxed);
                    if b.kept < MAX_LINES {
                        let k = b.kept;
                        b.lines[k][..line.len()].copy_from_slice(line);
                        b.lens[k] = line.len();
                        // The ops' clock (lock-free, async-signal-safe; 0 if it fails).
                        b.times[k] = crate::clock::now_ns();
                        b.kept += 1;
                    }
                }
                b.partial_len = 0;
            } else if b.partial_len < LINE_BYTES {
                b.partial[b.partial_len] = c;
                b.partial_len += 1;
            }
        }
    });
}

/// The assert lines captured so far (the first [`MAX_LINES`]), each with the wall-clock ns at
/// which it was printed, and how many were printed in all.
pub(crate) fn captured() -> (Vec<(String, u64)>, u64) {
    let lines = with_buffer(1_000_000, |b| {
        (0..b.kept)
            .map(|i| {
                (
                    String::from_utf8_lossy(&b.lines[i][..b.lens[i]]).into_owned(),
                    b.times[i],
                )
            })
            .collect()
    })
    .unwrap_or_default();
    (lines, SEEN.load(Ordering::Relaxed))
}

/// Forgets captured lines (a forked child reports its own). The lock is forced free: the thread
/// that held it at fork time does not exist in the child.
pub(crate) fn reset_after_fork() {
    SHARED.busy.store(false, Ordering::Release);
    let _ = with_buffer(1, |b| {
        b.kept = 0;
        b.partial_len = 0;
    });
    SEEN.store(0, Ordering::Relaxed);
    // A patch under way in another parent thread at fork time never finishes in the child:
    // the child patches again (slots already patched are skipped).
    let _ = PATCH_STATE.compare_exchange(1, 0, Ordering::AcqRel, Ordering::Acquire);
}

/// Whether the driver's import slots were patched: 0 not yet, 1 being patched (by one thread),
/// 2 done. Patching is never repeated or done by two threads at once: a slot's page is made
/// writable, written and made read-only again, and a second patcher re-protecting the page while
/// the first is between its `mprotect` and its store crashed the program (issue 19 item 1).
static PATCH_STATE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Patches the driver module holding `addr_in_driver`, once per process (no-op off x86-64
/// Linux). Threads that find the patch done or under way return at once (nothing waits: an
/// assert line printed by the driver meanwhile is not captured, nothing else changes).
pub(crate) fn hook_driver(addr_in_driver: usize) {
    if PATCH_STATE
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        // SAFETY: reads loader data of a loaded module, writes only its GOT slots.
        let n =
            std::panic::catch_unwind(|| unsafe { got::patch_module(addr_in_driver) }).unwrap_or(0);
        PATCHED.fetch_add(n, Ordering::Relaxed);
        if crate::config::get().debug {
            crate::safety::say(&format!(
                "cudablame: device-assert capture: {n} stdio import slots of the driver patched"
            ));
        }
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    let _ = addr_in_driver;
    PATCH_STATE.store(2, Ordering::Release);
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod capture;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod got;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feeds_lines_split_over_calls() {
        reset_after_fork();
        feed(b"hello\n");
        feed(b"x.cu:3: k: block: [0,0,0], thread: [1,0,0] ");
        feed(b"Assertion `a` failed.\nx.cu:3: k: block: [0,0,0], thread: [2,0,0] Assertion `a` failed.\n");
        let (lines, seen) = captured();
        assert_eq!(seen, 2);
        assert_eq!(lines.len(), 2);
        assert!(lines[0]
            .0
            .ends_with("thread: [1,0,0] Assertion `a` failed."));
        assert!(lines[0].1 > 0 && lines[0].1 <= lines[1].1);
        reset_after_fork();
        assert_eq!(captured().1, 0);
    }
}
