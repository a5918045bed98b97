//! Patching the driver's own import slots: finds the module holding an address
//! (`dl_iterate_phdr`), walks its dynamic section for the `R_X86_64_JUMP_SLOT` /
//! `R_X86_64_GLOB_DAT` relocations of the stdio functions in [`super::capture::targets`], and
//! points each GOT slot at the replacement (a RELRO page made writable for the write only).

use super::capture::targets;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

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
pub(crate) unsafe fn patch_module(addr: usize) -> usize {
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
            std::slice::from_raw_parts(table as *const Rela, bytes / std::mem::size_of::<Rela>())
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
            let name =
                unsafe { CStr::from_ptr((strtab + sym.name as usize) as *const c_char) }.to_bytes();
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
