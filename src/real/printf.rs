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
pub const MAX_LINES: usize = 8;
/// Bytes kept per line (longer lines are cut).
pub const LINE_BYTES: usize = 512;

struct Buffer {
    /// Text of the line being assembled (a line may come in several calls).
    partial: [u8; LINE_BYTES],
    partial_len: usize,
    lines: [[u8; LINE_BYTES]; MAX_LINES],
    lens: [usize; MAX_LINES],
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
        kept: 0,
    }),
};

/// Assert lines the driver printed, including those not kept.
static SEEN: AtomicU64 = AtomicU64::new(0);
/// Slots patched (for tests and `CUDABLAME_DEBUG`).
pub static PATCHED: AtomicUsize = AtomicUsize::new(0);

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
pub fn is_assert_line(line: &[u8]) -> bool {
    contains(line, b"Assertion `") && contains(line, b"block: [")
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Feeds text the driver printed: complete lines that are asserts are kept.
pub fn feed(text: &[u8]) {
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

/// The assert lines captured so far (the first [`MAX_LINES`]) and how many were printed in all.
pub fn captured() -> (Vec<String>, u64) {
    let lines = with_buffer(1_000_000, |b| {
        (0..b.kept)
            .map(|i| String::from_utf8_lossy(&b.lines[i][..b.lens[i]]).into_owned())
            .collect()
    })
    .unwrap_or_default();
    (lines, SEEN.load(Ordering::Relaxed))
}

/// Forgets captured lines (a forked child reports its own). The lock is forced free: the thread
/// that held it at fork time does not exist in the child.
pub fn reset_after_fork() {
    SHARED.busy.store(false, Ordering::Release);
    let _ = with_buffer(1, |b| {
        b.kept = 0;
        b.partial_len = 0;
    });
    SEEN.store(0, Ordering::Relaxed);
}

/// Patches the driver module holding `addr_in_driver` (no-op off x86-64 Linux).
pub fn hook_driver(addr_in_driver: usize) {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        // SAFETY: reads loader data of a loaded module, writes only its GOT slots.
        let n =
            std::panic::catch_unwind(|| unsafe { imp::patch_module(addr_in_driver) }).unwrap_or(0);
        PATCHED.fetch_add(n, Ordering::Relaxed);
        if crate::config::get().debug {
            crate::safety::say(&format!(
                "cudablame: device-assert capture: {n} stdio import slots of the driver patched"
            ));
        }
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    let _ = addr_in_driver;
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod imp {
    use super::feed;
    use std::ffi::{c_char, c_int, c_void, CStr};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// x86-64 SysV `va_list` element (`__va_list_tag`): a `va_list` argument is a pointer to it.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct VaListTag {
        gp_offset: u32,
        fp_offset: u32,
        overflow_arg_area: *mut c_void,
        reg_save_area: *mut c_void,
    }

    extern "C" {
        fn vsnprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ap: *mut VaListTag) -> c_int;
    }

    type Vfprintf = unsafe extern "C" fn(*mut c_void, *const c_char, *mut VaListTag) -> c_int;
    type VfprintfChk =
        unsafe extern "C" fn(*mut c_void, c_int, *const c_char, *mut VaListTag) -> c_int;
    type Fputs = unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int;
    type Puts = unsafe extern "C" fn(*const c_char) -> c_int;
    type Fwrite = unsafe extern "C" fn(*const c_void, usize, usize, *mut c_void) -> usize;

    // What each patched slot held: the function the driver would have called.
    static VFPRINTF: AtomicUsize = AtomicUsize::new(0);
    static VFPRINTF_CHK: AtomicUsize = AtomicUsize::new(0);
    static FPUTS: AtomicUsize = AtomicUsize::new(0);
    static PUTS: AtomicUsize = AtomicUsize::new(0);
    static FWRITE: AtomicUsize = AtomicUsize::new(0);

    /// Formats a copy of the arguments and feeds the text; never panics out.
    ///
    /// # Safety
    /// `fmt` and `ap` are NULL or the format and `va_list` of a live `vfprintf` call.
    unsafe fn capture(fmt: *const c_char, ap: *mut VaListTag) {
        if fmt.is_null() || ap.is_null() {
            return;
        }
        let _ = std::panic::catch_unwind(|| {
            // SAFETY: `ap` is the caller's live `va_list` (checked non-NULL); copying the tag is
            // what `va_copy` does on x86-64, so the original is left unconsumed.
            let mut copy = unsafe { *ap };
            let mut buf = [0u8; 1024];
            // SAFETY: `fmt` and the copied arguments are the driver's own, valid for this
            // format; `buf` is writable for `buf.len()` bytes and vsnprintf never writes more.
            let n =
                unsafe { vsnprintf(buf.as_mut_ptr() as *mut c_char, buf.len(), fmt, &mut copy) };
            if n > 0 {
                let n = (n as usize).min(buf.len() - 1);
                feed(&buf[..n]);
            }
        });
    }

    fn real(slot: &AtomicUsize) -> usize {
        slot.load(Ordering::Acquire)
    }

    extern "C" {
        /// glibc's standard streams (`<stdio.h>`).
        static stdout: *mut c_void;
        static stderr: *mut c_void;
    }

    /// Whether `f` is the process's stdout or stderr: the driver also writes other files with
    /// the same functions (thread names into `/proc/self/task/TID/comm`, seen on the H200), and
    /// only what it prints is an assert.
    fn printed(f: *mut c_void) -> bool {
        // SAFETY: reads glibc's two FILE pointers.
        !f.is_null() && unsafe { f == stdout || f == stderr }
    }

    unsafe extern "C" fn hook_vfprintf(
        f: *mut c_void,
        fmt: *const c_char,
        ap: *mut VaListTag,
    ) -> c_int {
        if printed(f) {
            // SAFETY: the driver's own format and `va_list`, for this call.
            unsafe {
                capture(fmt, ap);
            }
        }
        // SAFETY: the slot held this libc function (of this signature) before it was patched,
        // and the hook is only reachable through a patched slot, so it is set.
        let r: Vfprintf = unsafe { std::mem::transmute::<usize, Vfprintf>(real(&VFPRINTF)) };
        // SAFETY: the driver's own arguments, passed on unchanged.
        unsafe { r(f, fmt, ap) }
    }

    unsafe extern "C" fn hook_vfprintf_chk(
        f: *mut c_void,
        flag: c_int,
        fmt: *const c_char,
        ap: *mut VaListTag,
    ) -> c_int {
        if printed(f) {
            // SAFETY: the driver's own format and `va_list`, for this call.
            unsafe {
                capture(fmt, ap);
            }
        }
        // SAFETY: the slot held this libc function (of this signature) before it was patched,
        // and the hook is only reachable through a patched slot, so it is set.
        let r: VfprintfChk =
            unsafe { std::mem::transmute::<usize, VfprintfChk>(real(&VFPRINTF_CHK)) };
        // SAFETY: the driver's own arguments, passed on unchanged.
        unsafe { r(f, flag, fmt, ap) }
    }

    unsafe extern "C" fn hook_fputs(s: *const c_char, f: *mut c_void) -> c_int {
        if !s.is_null() && printed(f) {
            // SAFETY: fputs's contract: `s` is NUL-terminated.
            feed(unsafe { CStr::from_ptr(s) }.to_bytes());
        }
        // SAFETY: as in `hook_vfprintf`: the slot's original function, of this signature.
        let r: Fputs = unsafe { std::mem::transmute::<usize, Fputs>(real(&FPUTS)) };
        // SAFETY: the driver's own arguments, passed on unchanged.
        unsafe { r(s, f) }
    }

    unsafe extern "C" fn hook_puts(s: *const c_char) -> c_int {
        if !s.is_null() {
            // SAFETY: puts's contract: `s` is NUL-terminated.
            feed(unsafe { CStr::from_ptr(s) }.to_bytes());
            feed(b"\n");
        }
        // SAFETY: as in `hook_vfprintf`: the slot's original function, of this signature.
        let r: Puts = unsafe { std::mem::transmute::<usize, Puts>(real(&PUTS)) };
        // SAFETY: the driver's own argument, passed on unchanged.
        unsafe { r(s) }
    }

    unsafe extern "C" fn hook_fwrite(
        p: *const c_void,
        size: usize,
        n: usize,
        f: *mut c_void,
    ) -> usize {
        if !p.is_null() && printed(f) {
            if let Some(len) = size.checked_mul(n).filter(|&l| l <= 4096) {
                // SAFETY: fwrite's contract: `p` holds `size * n` readable bytes.
                feed(unsafe { std::slice::from_raw_parts(p as *const u8, len) });
            }
        }
        // SAFETY: as in `hook_vfprintf`: the slot's original function, of this signature.
        let r: Fwrite = unsafe { std::mem::transmute::<usize, Fwrite>(real(&FWRITE)) };
        // SAFETY: the driver's own arguments, passed on unchanged.
        unsafe { r(p, size, n, f) }
    }

    /// `(symbol, our function, where the original goes)`.
    fn targets() -> [(&'static [u8], usize, &'static AtomicUsize); 5] {
        [
            (b"vfprintf", hook_vfprintf as *const () as usize, &VFPRINTF),
            (
                b"__vfprintf_chk",
                hook_vfprintf_chk as *const () as usize,
                &VFPRINTF_CHK,
            ),
            (b"fputs", hook_fputs as *const () as usize, &FPUTS),
            (b"puts", hook_puts as *const () as usize, &PUTS),
            (b"fwrite", hook_fwrite as *const () as usize, &FWRITE),
        ]
    }

    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const PT_GNU_RELRO: u32 = 0x6474_e552;
    const DT_NULL: i64 = 0;
    const DT_PLTRELSZ: i64 = 2;
    const DT_STRTAB: i64 = 5;
    const DT_SYMTAB: i64 = 6;
    const DT_RELA: i64 = 7;
    const DT_RELASZ: i64 = 8;
    const DT_STRSZ: i64 = 10;
    const DT_JMPREL: i64 = 23;
    const R_X86_64_GLOB_DAT: u64 = 6;
    const R_X86_64_JUMP_SLOT: u64 = 7;

    #[repr(C)]
    struct Dyn {
        tag: i64,
        val: u64,
    }
    #[repr(C)]
    struct Rela {
        offset: u64,
        info: u64,
        addend: i64,
    }
    #[repr(C)]
    struct Sym {
        name: u32,
        info: u8,
        other: u8,
        shndx: u16,
        value: u64,
        size: u64,
    }

    /// What `dl_iterate_phdr` found for the module holding an address.
    struct Found {
        want: usize,
        base: usize,
        dynamic: usize,
        relro: Option<(usize, usize)>,
        ok: bool,
    }

    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `Found` that `patch_module` passed to dl_iterate_phdr, alive and
        // not otherwise borrowed during the iteration.
        let found = unsafe { &mut *(data as *mut Found) };
        // SAFETY: glibc passes a valid `dl_phdr_info` for the duration of the callback.
        let info = unsafe { &*info };
        let base = info.dlpi_addr as usize;
        // SAFETY: `dlpi_phdr` points to `dlpi_phnum` program headers of a loaded module.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let holds = phdrs.iter().any(|p| {
            p.p_type == PT_LOAD
                && (base + p.p_vaddr as usize..base + (p.p_vaddr + p.p_memsz) as usize)
                    .contains(&found.want)
        });
        if !holds {
            return 0;
        }
        found.base = base;
        for p in phdrs {
            match p.p_type {
                PT_DYNAMIC => found.dynamic = base + p.p_vaddr as usize,
                PT_GNU_RELRO => found.relro = Some((base + p.p_vaddr as usize, p.p_memsz as usize)),
                _ => {}
            }
        }
        found.ok = found.dynamic != 0;
        1
    }

    /// Patches the import slots of the module holding `addr`; returns how many were patched.
    ///
    /// # Safety
    /// `addr` lies in a loaded module whose dynamic section and relocation tables are mapped
    /// (the driver, found by `real`); no other thread rewrites its GOT meanwhile.
    pub unsafe fn patch_module(addr: usize) -> usize {
        let mut found = Found {
            want: addr,
            base: 0,
            dynamic: 0,
            relro: None,
            ok: false,
        };
        // SAFETY: `visit` matches the callback type and only uses `found`, which outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(visit), &mut found as *mut Found as *mut c_void) };
        if !found.ok {
            return 0;
        }
        let base = found.base;
        // glibc rewrites most d_ptr values to absolute addresses (not when the dynamic section
        // is read-only): a value below the load base is still relative.
        let abs = |v: u64| -> usize {
            let v = v as usize;
            if v < base {
                base + v
            } else {
                v
            }
        };
        let (mut strtab, mut strsz, mut symtab) = (0usize, 0usize, 0usize);
        let (mut rela, mut relasz, mut jmprel, mut pltrelsz) = (0usize, 0usize, 0usize, 0usize);
        let mut d = found.dynamic as *const Dyn;
        for _ in 0..4096 {
            // SAFETY: `d` walks the module's mapped `PT_DYNAMIC` array, which ends at DT_NULL
            // (and the walk is bounded besides).
            let e = unsafe { &*d };
            match e.tag {
                DT_NULL => break,
                DT_STRTAB => strtab = abs(e.val),
                DT_STRSZ => strsz = e.val as usize,
                DT_SYMTAB => symtab = abs(e.val),
                DT_RELA => rela = abs(e.val),
                DT_RELASZ => relasz = e.val as usize,
                DT_JMPREL => jmprel = abs(e.val),
                DT_PLTRELSZ => pltrelsz = e.val as usize,
                _ => {}
            }
            // SAFETY: still inside the dynamic array: DT_NULL was not reached.
            d = unsafe { d.add(1) };
        }
        if strtab == 0 || symtab == 0 {
            return 0;
        }
        let mut patched = 0;
        for (table, bytes) in [(jmprel, pltrelsz), (rela, relasz)] {
            if table == 0 {
                continue;
            }
            // SAFETY: DT_JMPREL/DT_RELA and their sizes describe mapped `Elf64_Rela` tables.
            let relas = unsafe {
                std::slice::from_raw_parts(
                    table as *const Rela,
                    bytes / std::mem::size_of::<Rela>(),
                )
            };
            for r in relas {
                let kind = r.info & 0xffff_ffff;
                if kind != R_X86_64_JUMP_SLOT && kind != R_X86_64_GLOB_DAT {
                    continue;
                }
                // SAFETY: a relocation's symbol index lies in the module's DT_SYMTAB.
                let sym = unsafe { &*((symtab as *const Sym).add((r.info >> 32) as usize)) };
                if sym.shndx != 0 || (strsz != 0 && sym.name as usize >= strsz) {
                    continue; // defined here, not an import
                }
                // SAFETY: `sym.name` is an offset into DT_STRTAB (checked against DT_STRSZ when
                // known), whose strings are NUL-terminated.
                let name = unsafe { CStr::from_ptr((strtab + sym.name as usize) as *const c_char) }
                    .to_bytes();
                let Some(&(_, ours, original)) = targets().iter().find(|t| t.0 == name) else {
                    continue;
                };
                let slot = base + r.offset as usize;
                // SAFETY: `slot` is this relocation's GOT entry in the mapped module.
                if unsafe { patch_slot(slot, ours, original, name, &found) } {
                    patched += 1;
                }
            }
        }
        patched
    }

    /// Points one GOT slot at `ours`, keeping what it held (or, for a lazy slot still pointing
    /// into the module's PLT, the symbol as the dynamic linker would bind it) in `original`.
    ///
    /// # Safety
    /// `slot` is an 8-byte aligned GOT entry of the mapped module described by `found`.
    unsafe fn patch_slot(
        slot: usize,
        ours: usize,
        original: &AtomicUsize,
        name: &[u8],
        found: &Found,
    ) -> bool {
        // SAFETY: per the contract, an aligned, mapped pointer-sized slot; atomics tolerate the
        // loader's lazy binding writing it concurrently.
        let cell = unsafe { &*(slot as *const AtomicUsize) };
        let current = cell.load(Ordering::Acquire);
        if current == ours {
            return false;
        }
        let mut target = current;
        // SAFETY: `Dl_info` is plain data (pointers and integers): all-zero is valid.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads loader data and writes `info`.
        let lazy = unsafe { libc::dladdr(current as *const c_void, &mut info) } != 0
            && info.dli_fbase as usize == found.base;
        if lazy || current == 0 {
            let mut cname = [0u8; 32];
            if name.len() >= cname.len() {
                return false;
            }
            cname[..name.len()].copy_from_slice(name);
            // SAFETY: a pseudo-handle and `cname`, NUL-terminated (zero-filled beyond `name`).
            target = unsafe {
                crate::real::dlsym(libc::RTLD_DEFAULT, cname.as_ptr() as *const c_char) as usize
            };
        }
        if target == 0 {
            return false;
        }
        // The same symbol may have both a JUMP_SLOT and a GLOB_DAT slot: both bind alike.
        let _ = original.compare_exchange(0, target, Ordering::AcqRel, Ordering::Acquire);
        if original.load(Ordering::Acquire) != target {
            return false;
        }
        // SAFETY: sysconf has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            n if n > 0 => n as usize,
            _ => 4096,
        };
        // The loader makes only the whole pages of PT_GNU_RELRO read-only (its end rounded down).
        let in_relro = found
            .relro
            .is_some_and(|(start, len)| (start..(start + len) & !(page - 1)).contains(&slot));
        let first = slot & !(page - 1);
        if in_relro
            // SAFETY: `first` is the page holding the slot, inside the module's RELRO mapping;
            // making it writable changes no byte of it.
            && unsafe {
                libc::mprotect(first as *mut c_void, page, libc::PROT_READ | libc::PROT_WRITE)
            } != 0
        {
            return false;
        }
        cell.store(ours, Ordering::Release);
        if in_relro {
            // SAFETY: the same page back to read-only, as the loader left it.
            unsafe { libc::mprotect(first as *mut c_void, page, libc::PROT_READ) };
        }
        true
    }
}

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
        assert!(lines[0].ends_with("thread: [1,0,0] Assertion `a` failed."));
        reset_after_fork();
        assert_eq!(captured().1, 0);
    }
}
