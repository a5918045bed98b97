//! Deferred unwinding: a launch copies the top of its thread's stack (from the hooked entry
//! point's frame upwards, [`crate::config::Config::stack_bytes`] bytes at most) instead of
//! unwinding it; the copy is unwound only if a report names the launch, the way `perf` samples
//! user stacks. A copy costs one `memcpy` of hot stack memory; an unwind through a large library
//! costs a rule lookup per frame (see [`super::unwind`]).
//!
//! The unwind from a copy reads exactly what an unwind at launch time would have read, as long as
//! the modules that the frames belong to are still loaded: the entry point's registers and the
//! stack words above them are what the launching thread had when it called the driver.

use super::{EntryRegs, NativeStack};
use std::cell::Cell;

/// A thread's launches between two measurements of how much of its stack a copy needs.
pub(crate) const MEASURE_EVERY: u32 = 1024;

/// What a thread learned of its launch stacks: the most bytes above the entry point's `rsp`
/// that an unwind of the configured depth read, with room to spare (0: not measured yet), and
/// the launches left until the next measurement.
#[derive(Clone, Copy)]
struct Reach {
    bytes: u32,
    until: u32,
}

thread_local! {
    static REACH: Cell<Reach> = const { Cell::new(Reach { bytes: 0, until: 0 }) };
}

/// Bytes to copy of the calling thread's stack for a launch entered with `regs`: what an unwind
/// of `depth` frames below the entry point reads, learned from a live unwind at this thread's
/// first launch and every [`MEASURE_EVERY`]th after it (the largest seen, plus a quarter and
/// 512 bytes), at most `max` (`CUDABLAME_STACK_BYTES`). Copying 8 KiB cost 240 to 480 ns per
/// launch on the H200 host (stack phase of `CUDABLAME_STATS`) while a C program's launch
/// stack unwinds from well under 2 KiB. A launch from a deeper call chain than any measured
/// gets a copy that is too short: its unwind stops early (fewer native frames, never wrong ones;
/// the Python frames are kept apart). `regs` must have been read in a live frame of this thread
/// (`now_ns`: any clock reading, it paces module-list checks).
pub(crate) fn length(regs: &EntryRegs, max: usize, depth: usize, now_ns: u64) -> usize {
    REACH
        .try_with(|r| {
            let mut reach = r.get();
            if reach.until == 0 {
                let mut s = NativeStack::EMPTY;
                let want = (depth + 1).min(s.capacity());
                let (_, read) = super::unwind::capture_reach(s.slots(want), now_ns, regs);
                if read > 0 {
                    let padded = (read + read / 4 + 512).next_multiple_of(256);
                    reach.bytes = reach.bytes.max(padded.min(max as u64) as u32);
                }
                reach.until = MEASURE_EVERY;
            }
            reach.until -= 1;
            r.set(reach);
            match reach.bytes {
                0 => max,
                b => (b as usize).min(max),
            }
        })
        .unwrap_or(max)
}

/// A copy of the top of one launch's stack, owned by its stream's ring (`record::streams`).
pub(crate) struct StackCopy {
    /// The sequence number of the op on its stream this copy belongs to (0: none).
    pub(crate) seq: u64,
    /// The load generation the copy was taken in (`unwind::load_generation`): its frames are
    /// read with the module list of when it is unwound, so a frame in a module loaded since is
    /// not that module's (issue 19 item 6).
    gen: u64,
    regs: EntryRegs,
    len: usize,
    bytes: Box<[u8]>,
}

impl StackCopy {
    /// An empty copy with room for `capacity` bytes (allocated here, never on a launch).
    pub(crate) fn new(capacity: usize) -> StackCopy {
        StackCopy {
            seq: 0,
            gen: 0,
            regs: EntryRegs::default(),
            len: 0,
            bytes: vec![0u8; capacity].into_boxed_slice(),
        }
    }

    /// Copies the calling thread's stack from `regs.rsp` upwards (at most `len` bytes and this
    /// copy's capacity, never past the thread's stack) for op `seq`. `regs` must have been read in
    /// a frame of this thread that is still live. Leaves the copy empty when the stack bounds are
    /// unknown.
    #[inline]
    pub(crate) fn fill(&mut self, seq: u64, regs: &EntryRegs, len: usize) {
        self.seq = seq;
        self.gen = super::unwind::load_generation();
        self.regs = *regs;
        let (lo, hi) = super::unwind::stack_bounds();
        self.len = if regs.rsp >= lo && regs.rsp < hi {
            ((hi - regs.rsp) as usize).min(self.bytes.len()).min(len)
        } else {
            0
        };
        // SAFETY: [rsp, rsp + len) lies within this thread's own stack (checked above), which is
        // mapped and readable; the destination has room for `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                regs.rsp as usize as *const u8,
                self.bytes.as_mut_ptr(),
                self.len,
            );
        }
    }

    /// Report time: unwinds the copy into return addresses (up to `depth` frames below the
    /// entry point's own frame, which is cudablame's).
    pub(crate) fn unwind(&self, depth: usize) -> NativeStack {
        let mut s = NativeStack::EMPTY;
        if self.len == 0 {
            return s;
        }
        let want = (depth + 1).min(s.capacity());
        let n = super::unwind::capture_copy(
            s.slots(want),
            self.regs,
            &self.bytes[..self.len],
            self.gen,
        );
        s.set_len(n);
        s.set_generation(self.gen);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn copied_here(copy: &mut StackCopy) {
        let regs = EntryRegs::here();
        copy.fill(7, &regs, usize::MAX);
        std::hint::black_box(&*copy); // keeps this frame: not a tail call
    }

    #[inline(never)]
    fn outer(copy: &mut StackCopy) {
        copied_here(copy);
        std::hint::black_box(&*copy);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn unwinding_a_copy_finds_the_callers() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let mut copy = StackCopy::new(16 * 1024);
        outer(&mut copy);
        assert_eq!(copy.seq, 7);
        // The live frames are gone now: only the copy can name them.
        let stack = copy.unwind(16);
        let mut names = Vec::new();
        for &ip in stack.ips().iter() {
            backtrace::resolve((ip - 1) as *mut std::ffi::c_void, |sym| {
                names.push(sym.name().map(|n| n.to_string()).unwrap_or_default())
            });
        }
        assert!(names.iter().any(|n| n.contains("outer")), "{names:?}");
        assert!(
            names.iter().any(|n| n.contains("unwinding_a_copy")),
            "{names:?}"
        );
    }

    #[test]
    fn a_copy_too_short_for_the_callers_stops_early() {
        let mut copy = StackCopy::new(16);
        outer(&mut copy);
        assert!(copy.unwind(16).ips().len() <= 2);
    }

    /// Copies this thread's stack for a launch entered here: the learned length (returned), or
    /// all of it when `full`.
    #[inline(never)]
    fn copy_with(copy: &mut StackCopy, full: bool) -> usize {
        let regs = EntryRegs::here();
        let learned = length(&regs, copy.bytes.len(), 4, 0);
        copy.fill(1, &regs, if full { usize::MAX } else { learned });
        std::hint::black_box(&*copy);
        learned
    }

    /// [`copy_with`] below a frame holding 4 KiB of locals (a deeper call chain).
    #[inline(never)]
    fn deeper(copy: &mut StackCopy, full: bool) -> usize {
        let pad = std::hint::black_box([7u8; 4096]);
        let learned = copy_with(copy, full);
        std::hint::black_box(&pad);
        learned
    }

    /// Two copies of one call site's stack: the learned length and all of it.
    fn short_and_full(copy: fn(&mut StackCopy, bool) -> usize) -> (StackCopy, StackCopy, usize) {
        let mut c = [StackCopy::new(65536), StackCopy::new(65536)];
        let mut learned = 0;
        for (i, c) in c.iter_mut().enumerate() {
            learned = copy(c, i == 1);
        }
        let [short, full] = c;
        (short, full, learned)
    }

    fn ips(copy: &StackCopy, depth: usize) -> Vec<usize> {
        copy.unwind(depth).ips().to_vec()
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_learned_length_unwinds_to_the_same_frames_as_a_full_copy() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        // A fresh thread: nothing learned yet.
        std::thread::spawn(|| {
            let (short, full, learned) = short_and_full(copy_with);
            assert!(learned > 0 && learned < 65536, "{learned}");
            assert_eq!(short.len, learned.min(full.len));
            assert!(ips(&short, 4).len() >= 3);
            let name = |ip: usize| {
                let mut n = String::new();
                backtrace::resolve((ip - 1) as *mut std::ffi::c_void, |sym| {
                    n = format!("{:?}", sym.name())
                });
                n
            };
            let names = |c: &StackCopy| ips(c, 4).into_iter().map(name).collect::<Vec<_>>();
            // The same frames (the two calls may be two call sites of one caller: frame 1's
            // return addresses can differ, its function cannot).
            assert_eq!(names(&short), names(&full));
            assert_eq!(ips(&short, 4)[2..], ips(&full, 4)[2..]);
        })
        .join()
        .unwrap();
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_deeper_call_chain_than_measured_loses_frames_never_gets_wrong_ones() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        std::thread::spawn(|| {
            let learned = copy_with(&mut StackCopy::new(65536), false); // measured, shallow
                                                                        // The next launches of this thread are not measured (MEASURE_EVERY): one from below
                                                                        // 4 KiB of locals gets the shallow length.
            let (short, full, again) = short_and_full(deeper);
            assert_eq!(again, learned);
            let (s, f) = (ips(&short, 4), ips(&full, 4));
            assert!(s.len() < f.len(), "{s:x?} {f:x?}");
            assert_eq!(s[..], f[..s.len()]);
        })
        .join()
        .unwrap();
    }
}
