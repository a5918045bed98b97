//! Native unwinding with the `framehop` crate: of the calling thread's live stack (cold paths: the
//! reporting call, capture begin, a failed launch) and of a launch's stack copy ([`super::copy`])
//! when a report is written. Launches never unwind: they copy stack bytes, which costs a fraction
//! of an unwind (measured on the H200 in a PyTorch GPT step: 75 to 300 ns a frame for 17 frames
//! with cached rules, 1.2 to 4.2 us a launch, and a memo of unwinds hit only 68% of launches).
//!
//! Modules are found with `dl_iterate_phdr`: the executable segment, `PT_GNU_EH_FRAME`
//! (`.eh_frame_hdr`) and, through the header's `eh_frame_ptr`, `.eh_frame` (bounded by the end of
//! its segment). The list is rebuilt when glibc's load/unload counters (`dlpi_adds`,
//! `dlpi_subs`) change, checked at most every [`RESCAN_NS`]. Stack reads are bounded by the
//! calling thread's stack (`pthread_getattr_np`), so a wrong rule can stop the walk early but never
//! read outside the stack.
//!
//! Load generations (issue 19 item 6): a stack is taken in one module list and may be unwound or
//! symbolized in a later one, after its library was unloaded and another one mapped at the same
//! address. [`load_generation`] counts unloads (bumped by the interposed `dlclose` when glibc's
//! unload counter moved, [`unloading`]; unloads cudablame does not see, such as a `dlclose` from
//! a library loaded `RTLD_DEEPBIND`, are not counted); every stack
//! keeps the generation it was taken in, and [`SPANS`] keeps, for each loaded module's text, the
//! generation in which cudablame first saw it (every module present at a `dlclose` is noted
//! before the unload is counted). A frame whose address lies in a module first seen in a later
//! generation than its stack's was not that module's: it reads "unloaded module"
//! ([`loaded_after`]), and an unwind stops there (the new module's rules would be wrong).

use crate::safety::lock::RwLock;
use crate::safety::{per_thread, Resettable};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, MustNotAllocateDuringUnwind, Unwinder};
use std::cell::RefCell;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

/// Module-list freshness check period.
const RESCAN_NS: u64 = 100_000_000;

/// A section of a loaded module, read in place (modules are never copied).
#[derive(Clone, Default)]
pub(crate) struct Mapped {
    ptr: usize,
    len: usize,
}

impl Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: points into a mapped, read-only segment of a module that is loaded (the list is
        // rebuilt when a module is unloaded).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

type Native = UnwinderX86_64<Mapped, MustNotAllocateDuringUnwind>;

struct Modules {
    unwinder: Native,
    /// `(dlpi_adds, dlpi_subs)` when the list was built.
    counters: (u64, u64),
}

/// Resettable: a forked child drops it without taking its lock (another parent thread may have
/// been unwinding at fork time), see `safety::Resettable`.
static MODULES: Resettable<RwLock<Option<Modules>>> = Resettable::new();
static LAST_CHECK_NS: AtomicU64 = AtomicU64::new(0);
/// See [`load_generation`].
static LOAD_GEN: AtomicU64 = AtomicU64::new(0);
/// glibc's unload counter (`dlpi_subs`) when [`LOAD_GEN`] was last brought up to date.
static SUBS_SEEN: AtomicU64 = AtomicU64::new(0);

/// The load generation: how many times modules were unloaded (as far as cudablame saw) since
/// the process started. Stacks keep the generation they were taken in. One relaxed load.
#[inline]
pub(crate) fn load_generation() -> u64 {
    LOAD_GEN.load(Ordering::Relaxed)
}

/// Counts an unload if glibc's unload counter moved since it was last looked at.
fn note_unloads(subs: u64) {
    let seen = SUBS_SEEN.load(Ordering::Acquire);
    if subs != seen
        && SUBS_SEEN
            .compare_exchange(seen, subs, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        LOAD_GEN.fetch_add(1, Ordering::AcqRel);
    }
}

/// A loaded module's text range and the load generation in which it was first seen.
struct Span {
    lo: usize,
    hi: usize,
    name: Vec<u8>,
    gen: u64,
}

/// Spans of the loaded modules and glibc's `(dlpi_adds, dlpi_subs)` when they were read.
#[derive(Default)]
struct Spans {
    spans: Vec<Span>,
    counters: Option<(u64, u64)>,
}

/// Resettable: a forked child drops it without taking its lock.
static SPANS: Resettable<crate::safety::lock::Mutex<Spans>> = Resettable::new();

/// Brings [`SPANS`] up to date with the loaded modules (if glibc's counters moved): a module
/// seen before at the same address under the same name keeps its generation, a new one gets the
/// current [`load_generation`], a gone one is dropped.
fn sync_spans() {
    let counters = load_counters();
    let mut table = SPANS.get().lock();
    if table.counters == Some(counters) {
        return;
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _: usize,
        out: *mut libc::c_void,
    ) -> i32 {
        // SAFETY: valid pointers from dl_iterate_phdr for the duration of the callback; `out` is
        // the Vec of `sync_spans`.
        let (info, out) = unsafe { (&*info, &mut *(out as *mut Vec<(usize, usize, Vec<u8>)>)) };
        let name = if info.dlpi_name.is_null() {
            Vec::new()
        } else {
            // SAFETY: a NUL-terminated path owned by the loader, valid during the callback.
            unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
                .to_bytes()
                .to_vec()
        };
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        for p in phdrs {
            if p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0 {
                let lo = info.dlpi_addr as usize + p.p_vaddr as usize;
                out.push((lo, lo + p.p_memsz as usize, name.clone()));
            }
        }
        0
    }
    let mut now: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    // SAFETY: the callback only pushes to `now`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut now as *mut _ as *mut libc::c_void) };
    let gen = load_generation();
    let old = std::mem::take(&mut table.spans);
    let mut spans: Vec<Span> = now
        .into_iter()
        .map(|(lo, hi, name)| {
            let seen = old
                .iter()
                .find(|o| o.lo == lo && o.hi == hi && o.name == name)
                .map_or(gen, |o| o.gen);
            Span {
                lo,
                hi,
                name,
                gen: seen,
            }
        })
        .collect();
    spans.sort_by_key(|s| s.lo);
    table.spans = spans;
    table.counters = Some(counters);
}

/// Whether the code at `addr` belongs to a module loaded after load generation `gen` (so a stack
/// of generation `gen` cannot have had a frame of it there: the frame was in a module unloaded
/// since). False when nothing was unloaded since `gen` (one atomic load), or when no loaded module
/// holds `addr`.
pub(crate) fn loaded_after(addr: usize, gen: u64) -> bool {
    if gen >= load_generation() {
        return false;
    }
    sync_spans();
    let table = SPANS.get().lock();
    let i = table.spans.partition_point(|s| s.lo <= addr);
    i > 0 && addr < table.spans[i - 1].hi && table.spans[i - 1].gen > gen
}

type Cache = CacheX86_64<MustNotAllocateDuringUnwind>;

per_thread! {
    /// framehop's rule cache for this thread's live unwinds (cold paths only), dropped at thread
    /// exit by a key destructor (no thread-local destructor: `safety::PerThread`).
    static CACHE: RefCell<Option<Box<Cache>>> = || RefCell::new(None);
}

thread_local! {
    /// `(low, high)` bounds of this thread's stack, 0 until read.
    static STACK: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// `(low, high)` addresses of the calling thread's stack (`pthread_getattr_np`), `(0, 0)` when
/// unknown (also while the thread's locals are being destroyed).
pub(crate) fn stack_bounds() -> (u64, u64) {
    STACK
        .try_with(|s| {
            if s.get().0 == 0 {
                s.set(read_stack_bounds());
            }
            s.get()
        })
        .unwrap_or_else(|_| read_stack_bounds())
}

/// Bytes of stack left below the caller on this thread: `None` when the thread's bounds are
/// unknown, 0 when the stack pointer is outside them (a signal handler on an alternate signal
/// stack, a fiber on a stack of its own: how much is left there is not known).
#[inline(never)]
pub(crate) fn stack_room() -> Option<u64> {
    let (lo, hi) = stack_bounds();
    let here = &lo as *const u64 as u64;
    (lo != 0).then(|| {
        if (lo..hi).contains(&here) {
            here - lo
        } else {
            0
        }
    })
}

/// Whether this thread has at least `need` bytes of stack left (or its bounds are unknown: then
/// as before such a check existed).
pub(crate) fn has_room(need: u64) -> bool {
    stack_room().is_none_or(|left| left >= need)
}

fn read_stack_bounds() -> (u64, u64) {
    let mut bounds = (0, 0);
    // SAFETY: pthread_getattr_np fills attr for the calling thread; destroyed after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) == 0 {
            let mut addr: *mut libc::c_void = std::ptr::null_mut();
            let mut size: usize = 0;
            if libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0 {
                bounds = (addr as u64, addr as u64 + size as u64);
            }
            libc::pthread_attr_destroy(&mut attr);
        }
    }
    bounds
}

/// glibc's `(dlpi_adds, dlpi_subs)`: loads and unloads so far.
fn load_counters() -> (u64, u64) {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _: usize,
        out: *mut libc::c_void,
    ) -> i32 {
        // SAFETY: called by dl_iterate_phdr with a valid info and our out pointer.
        unsafe { *(out as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs) };
        1
    }
    let mut c = (0u64, 0u64);
    // SAFETY: the callback only writes to `c`.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut c as *mut _ as *mut libc::c_void) };
    c
}

fn read_encoded_ptr(at: usize, encoding: u8) -> Option<usize> {
    // DW_EH_PE_pcrel | DW_EH_PE_sdata4 (0x1b) is what every linker writes for eh_frame_ptr;
    // DW_EH_PE_udata4/sdata8 absolute forms are accepted too.
    // SAFETY: `at` points into a mapped .eh_frame_hdr.
    unsafe {
        match encoding {
            0x1b => {
                Some((at as isize + std::ptr::read_unaligned(at as *const i32) as isize) as usize)
            }
            0x03 => Some(std::ptr::read_unaligned(at as *const u32) as usize),
            0x04 | 0x0c => Some(std::ptr::read_unaligned(at as *const u64) as usize),
            _ => None,
        }
    }
}

/// Builds the module list of the process.
fn scan() -> Modules {
    struct Acc {
        unwinder: Native,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _: usize,
        acc: *mut libc::c_void,
    ) -> i32 {
        // SAFETY: valid pointers from dl_iterate_phdr for the duration of the callback.
        let (info, acc) = unsafe { (&*info, &mut *(acc as *mut Acc)) };
        let bias = info.dlpi_addr as usize;
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let text = phdrs
            .iter()
            .find(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0);
        let hdr = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME);
        let (Some(text), Some(hdr)) = (text, hdr) else {
            return 0;
        };
        let hdr_avma = bias + hdr.p_vaddr as usize;
        // SAFETY: the header is mapped; version 1, then encodings, then eh_frame_ptr.
        let (version, ptr_enc) =
            unsafe { (*(hdr_avma as *const u8), *((hdr_avma + 1) as *const u8)) };
        if version != 1 {
            return 0;
        }
        let Some(eh_frame) = read_encoded_ptr(hdr_avma + 4, ptr_enc) else {
            return 0;
        };
        // .eh_frame runs to at most the end of the segment that holds it.
        let seg = phdrs.iter().find(|p| {
            let start = bias + p.p_vaddr as usize;
            p.p_type == libc::PT_LOAD && (start..start + p.p_memsz as usize).contains(&eh_frame)
        });
        let Some(seg) = seg else { return 0 };
        let seg_end = bias + (seg.p_vaddr + seg.p_memsz) as usize;
        let text_start = bias + text.p_vaddr as usize;
        let text_end = text_start + text.p_memsz as usize;
        let svma = |a: usize| (a - bias) as u64;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: Some(svma(text_start)..svma(text_end)),
            eh_frame_svma: Some(svma(eh_frame)..svma(seg_end)),
            eh_frame: Some(Mapped {
                ptr: eh_frame,
                len: seg_end - eh_frame,
            }),
            eh_frame_hdr_svma: Some(svma(hdr_avma)..svma(hdr_avma + hdr.p_memsz as usize)),
            eh_frame_hdr: Some(Mapped {
                ptr: hdr_avma,
                len: hdr.p_memsz as usize,
            }),
            ..Default::default()
        };
        let module = framehop::Module::new(
            String::new(),
            text_start as u64..text_end as u64,
            bias as u64,
            info,
        );
        acc.unwinder.add_module(module);
        0
    }
    let mut acc = Acc {
        unwinder: Native::new(),
    };
    let counters = load_counters();
    // SAFETY: the callback only touches `acc`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut acc as *mut Acc as *mut libc::c_void) };
    Modules {
        unwinder: acc.unwinder,
        counters,
    }
}

/// Rebuilds the module list if it is missing or, at most every [`RESCAN_NS`], if modules were
/// loaded or unloaded since.
fn refresh(now_ns: u64) {
    refresh_with(now_ns, true, scan);
}

/// What [`refresh_with`] did.
#[derive(Debug, PartialEq)]
enum Refreshed {
    /// Not checked: the list was checked less than [`RESCAN_NS`] ago (paced), or a `dlclose` is
    /// in progress.
    Skipped,
    /// Checked: the list knows every module loaded now.
    Current,
    /// A new list was scanned and stored.
    Stored,
    /// A new list was scanned while a `dlclose` began or ended: dropped.
    Dropped,
}

/// [`refresh`] with the module scan given (tests make a `dlclose` happen during it); `paced`:
/// skipped if the list was checked less than [`RESCAN_NS`] ago.
fn refresh_with(now_ns: u64, paced: bool, scan: impl FnOnce() -> Modules) -> Refreshed {
    if UNLOADING.load(Ordering::Acquire) > 0 {
        return Refreshed::Skipped;
    }
    let last = LAST_CHECK_NS.load(Ordering::Relaxed);
    let have = MODULES.get().read().is_some();
    if paced && have && now_ns.saturating_sub(last) < RESCAN_NS {
        return Refreshed::Skipped;
    }
    LAST_CHECK_NS.store(now_ns, Ordering::Relaxed);
    let epoch = UNLOAD_EPOCH.load(Ordering::Acquire);
    let counters = load_counters();
    if MODULES
        .get()
        .read()
        .as_ref()
        .is_some_and(|m| m.counters == counters)
    {
        return Refreshed::Current;
    }
    let fresh = scan();
    // A `dlclose` that began during the scan may have unmapped a module the scan listed: the list
    // is stored only if none began or ended meanwhile (checked under the lock `unloading` takes
    // before it unloads), else dropped (the next capture scans again; issue 19 item 6).
    let mut modules = MODULES.get().write();
    if UNLOADING.load(Ordering::Acquire) == 0 && UNLOAD_EPOCH.load(Ordering::Acquire) == epoch {
        *modules = Some(fresh);
        Refreshed::Stored
    } else {
        Refreshed::Dropped
    }
}

/// Return addresses of the calling thread's live stack, innermost first, into `out`; returns how
/// many. Starts at `from` (registers read in a frame of this thread that is still live), else
/// here. `now_ns` (any monotonic-enough clock the caller already read) paces module-list checks.
#[inline(never)]
pub(crate) fn capture(out: &mut [usize], now_ns: u64, from: Option<&super::EntryRegs>) -> usize {
    let start = from.copied().unwrap_or_else(super::EntryRegs::here);
    let (lo, hi) = stack_bounds();
    // SAFETY: within this thread's own stack, 8-byte aligned (checked by `walk`).
    walk(now_ns, start, lo, hi, out, None, |addr| unsafe {
        std::ptr::read_volatile(addr as *const u64)
    })
}

/// Return addresses of a copied stack, innermost first, into `out`; returns how many. `bytes`
/// is a copy of the stack from `start.rsp` upwards, taken in load generation `gen`; the unwind
/// stops where it would read past it, and at a frame in a module loaded since `gen` (which gets
/// [`super::UNLOADED_MODULE`]).
pub(crate) fn capture_copy(
    out: &mut [usize],
    start: super::EntryRegs,
    bytes: &[u8],
    gen: u64,
) -> usize {
    walk_copy(out, start, bytes, gen, None)
}

/// [`capture_copy`]'s walk over the copy, each word read also noted in `reads` (bytes above
/// `start.rsp`, value) when given.
fn walk_copy(
    out: &mut [usize],
    start: super::EntryRegs,
    bytes: &[u8],
    gen: u64,
    reads: Option<&std::cell::RefCell<Vec<(u32, u64)>>>,
) -> usize {
    let lo = start.rsp;
    let hi = lo.saturating_add(bytes.len() as u64);
    walk(
        super::super::record::now_ns(),
        start,
        lo,
        hi,
        out,
        Some(gen),
        |addr| {
            let at = (addr - lo) as usize;
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            let value = u64::from_ne_bytes(word);
            if let Some(reads) = reads {
                reads.borrow_mut().push((at as u32, value));
            }
            value
        },
    )
}

/// [`capture_copy`], and where each return address found was read: `(bytes above start.rsp,
/// value)` for the frames after the first, innermost first. The unwind is a function of the
/// start registers and of the words it reads, and a frame's return address sits at the same
/// distance from the entry point's stack pointer whenever the same functions are on the stack
/// at the same instructions: a later stack holding the same return addresses at the same
/// distances went through the same native path (`stack::sites`).
pub(crate) fn capture_copy_slots(
    out: &mut [usize],
    start: super::EntryRegs,
    bytes: &[u8],
    gen: u64,
) -> (usize, Vec<(u32, u64)>) {
    let reads = std::cell::RefCell::new(Vec::new());
    let n = walk_copy(out, start, bytes, gen, Some(&reads));
    // Each frame's return address is a word the unwind read, above the previous one's.
    let reads = reads.into_inner();
    let mut slots = Vec::new();
    let mut from = 0;
    // (No frame at all when the module list is being rebuilt: `n` is 0.)
    for &ip in out.get(1..n).unwrap_or_default() {
        match (reads[from..].iter()).position(|&(_, v)| v == ip as u64) {
            Some(i) => {
                slots.push(reads[from + i]);
                from += i + 1;
            }
            None => break,
        }
    }
    (n, slots)
}

/// One framehop unwind from `start` into `out`, reading stack words in `[lo, hi)` with `read`.
/// With `gen` (a copy's load generation), a frame in a module loaded since ends the walk as
/// [`super::UNLOADED_MODULE`].
fn walk(
    now_ns: u64,
    start: super::EntryRegs,
    lo: u64,
    hi: u64,
    out: &mut [usize],
    gen: Option<u64>,
    read: impl Fn(u64) -> u64,
) -> usize {
    refresh(now_ns);
    let guard = MODULES.get().read();
    let Some(modules) = guard.as_ref() else {
        return 0;
    };
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        if addr < lo || addr.saturating_add(8) > hi || !addr.is_multiple_of(8) {
            return Err(());
        }
        Ok(read(addr))
    };
    let mut unwind = |cache: &mut Cache| {
        let mut regs = UnwindRegsX86_64::new(start.rip, start.rsp, start.rbp);
        let mut frame = FrameAddress::from_instruction_pointer(start.rip);
        let mut n = 0;
        while n < out.len() {
            out[n] = frame.address() as usize;
            n += 1;
            if gen.is_some_and(|g| loaded_after(frame.address() as usize, g)) {
                out[n - 1] = super::UNLOADED_MODULE;
                break;
            }
            match modules
                .unwinder
                .unwind_frame(frame, &mut regs, cache, &mut read_stack)
            {
                Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                    Some(f) => frame = f,
                    None => break,
                },
                _ => break,
            }
        }
        n
    };
    // This thread's cache when it can be had (not after the thread's value was dropped, not
    // re-entered), else a fresh one.
    CACHE
        .with(|c| {
            c.try_borrow_mut().ok().map(|mut c| {
                let cache = c.get_or_insert_with(|| Box::new(Cache::new_in()));
                unwind(cache)
            })
        })
        .flatten()
        .unwrap_or_else(|| unwind(&mut Cache::new_in()))
}

/// Whether the module list knows every module loaded now (checked now, not paced: a library
/// loaded less than `RESCAN_NS` ago is in it), rebuilt first if it does not. False during a
/// `dlclose`. A launch site's return slots must come from a current list (`stack::sites`).
pub(crate) fn module_list_current(now_ns: u64) -> bool {
    matches!(
        refresh_with(now_ns, false, scan),
        Refreshed::Current | Refreshed::Stored
    )
}

/// Bumped when a `dlclose` begins and when it ends ([`UNLOAD_EPOCH`]): an unwind between two
/// equal readings ran with no module unloaded meanwhile.
pub(crate) fn unload_epoch() -> u64 {
    UNLOAD_EPOCH.load(Ordering::Acquire)
}

/// Libraries being unloaded right now (`dlclose` in progress): no module list is built meanwhile.
static UNLOADING: AtomicU64 = AtomicU64::new(0);

/// Runs `unload` (the real `dlclose`) with the module list dropped first (waiting for unwinds
/// in progress, 100 ms at most) and none built until it returns: no unwind reads a module being
/// unmapped, and the next capture after it sees the new list at once (not up to [`RESCAN_NS`]
/// later). Captures made meanwhile (other threads, destructors run by `dlclose`) get no frames.
///
/// Load generations: every module loaded now is noted in [`SPANS`] first (in the generation it
/// was loaded in), and if the unload removed a module (glibc's `dlpi_subs` moved) the
/// generation is bumped once it returned.
pub(crate) fn unloading<T>(unload: impl FnOnce() -> T) -> T {
    UNLOADING.fetch_add(1, Ordering::AcqRel);
    UNLOAD_EPOCH.fetch_add(1, Ordering::AcqRel);
    if let Some(mut modules) = MODULES
        .get()
        .try_write_for(std::time::Duration::from_millis(100))
    {
        *modules = None;
    }
    sync_spans();
    let out = unload();
    note_unloads(load_counters().1);
    sync_spans();
    UNLOAD_EPOCH.fetch_add(1, Ordering::AcqRel);
    UNLOADING.fetch_sub(1, Ordering::AcqRel);
    LAST_CHECK_NS.store(0, Ordering::Relaxed);
    out
}

/// Bumped when a `dlclose` begins and when it ends: a module list scanned while it changed is
/// not stored ([`refresh`]).
static UNLOAD_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Forgets the module list (a forked child): rebuilt on the next capture. Takes no lock.
pub(crate) fn forget_after_fork() {
    MODULES.reset_in_child();
    SPANS.reset_in_child();
    LAST_CHECK_NS.store(0, Ordering::Relaxed);
}

/// Tests: runs `f` with a module list that does not know the modules the stack's frames are in
/// (a stale list: the library they are in was loaded less than `RESCAN_NS` after the last
/// check), then lets the next capture scan the real list again.
#[cfg(test)]
pub(crate) fn with_stale_module_list<T>(f: impl FnOnce() -> T) -> T {
    *MODULES.get().write() = Some(Modules {
        unwinder: Native::new(),
        counters: (0, 0), // scanned before the launching code's library was loaded
    });
    LAST_CHECK_NS.store(super::super::record::now_ns(), Ordering::Relaxed);
    let out = f();
    MODULES.reset_in_child();
    LAST_CHECK_NS.store(0, Ordering::Relaxed);
    out
}

/// Serializes the unit tests that empty or replace the module list with those that need it.
#[cfg(test)]
pub(crate) static TEST_LOCK: crate::safety::lock::Mutex<()> = crate::safety::lock::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    /// A module list scanned while a `dlclose` ran (here: began during the scan) may name a
    /// library unmapped meanwhile: it is never stored.
    #[test]
    fn a_module_list_scanned_during_a_dlclose_is_not_stored() {
        let _serial = TEST_LOCK.lock();
        // Other tests unwind meanwhile: retry until this one's refresh is the one that scans.
        let mut outcome = Refreshed::Skipped;
        for _ in 0..100 {
            MODULES.reset_in_child();
            outcome = refresh_with(u64::MAX / 2, true, || {
                let m = scan();
                UNLOAD_EPOCH.fetch_add(1, Ordering::AcqRel); // a dlclose begins
                m
            });
            if !matches!(outcome, Refreshed::Skipped | Refreshed::Current) {
                break;
            }
        }
        assert_eq!(outcome, Refreshed::Dropped);
        let mut outcome = Refreshed::Skipped;
        for _ in 0..100 {
            MODULES.reset_in_child();
            outcome = refresh_with(u64::MAX / 2, true, scan);
            if !matches!(outcome, Refreshed::Skipped | Refreshed::Current) {
                break;
            }
        }
        assert_eq!(outcome, Refreshed::Stored);
    }

    #[test]
    fn a_frame_in_a_module_first_seen_after_the_stack_is_unloaded() {
        let _serial = TEST_LOCK.lock();
        let here = a_frame_in_a_module_first_seen_after_the_stack_is_unloaded as *const () as usize;
        sync_spans(); // this binary's span is noted in the generation it was loaded in
        let gen = load_generation();
        assert!(!loaded_after(0x1800, gen), "nothing unloaded since");
        // An unload, then a module at 0x1000..0x2000 first seen after it.
        LOAD_GEN.fetch_add(1, Ordering::AcqRel);
        SPANS.get().lock().spans.insert(
            0,
            Span {
                lo: 0x1000,
                hi: 0x2000,
                name: b"fake".to_vec(),
                gen: gen + 1,
            },
        );
        assert!(loaded_after(0x1800, gen), "a stack of before the unload");
        assert!(!loaded_after(0x1800, gen + 1), "a stack of after it");
        assert!(
            !loaded_after(here, gen),
            "a module seen before keeps its generation"
        );
        SPANS.get().lock().spans.retain(|s| s.lo != 0x1000);
    }
}
