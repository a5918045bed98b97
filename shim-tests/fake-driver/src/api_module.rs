//! Exports: modules, libraries, functions and kernels.
#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::context;
use crate::errors;
use crate::handles::handle_of;
use crate::module::{Module, FUNCS, LIBRARIES, MODULES};
use crate::types::*;
use crate::{guard, write_out};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

/// The NUL-terminated text at `image`, lossily decoded.
unsafe fn image_text(image: *const c_void) -> Res<String> {
    if image.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    // SAFETY: not NULL, so NUL-terminated text (the fake's image format; the callers' contract).
    Ok(unsafe { CStr::from_ptr(image as *const c_char) }
        .to_string_lossy()
        .into_owned())
}

/// Loads a module into the current context and returns its handle.
fn load_module(text: &str) -> Res<CUmodule> {
    let ctx = context::current_checked()?;
    let module = Module::load(text, Some(ctx))?;
    Ok(handle_of(MODULES.insert(module)))
}

/// `cuModuleLoad(CUmodule*, const char* fname)`: reads the image from a file.
#[no_mangle]
pub unsafe extern "C" fn cuModuleLoad(pmod: *mut CUmodule, fname: *const c_char) -> CUresult {
    guard(|| {
        context::current_checked()?;
        if pmod.is_null() || fname.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        // SAFETY: not NULL, so a NUL-terminated path (cuModuleLoad's contract).
        let path = unsafe { CStr::from_ptr(fname) }
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(&path).map_err(|_| errors::FILE_NOT_FOUND)?;
        let text = String::from_utf8_lossy(&bytes);
        // SAFETY: `pmod` is NULL or valid for a write, as cuModuleLoad's contract (cuda.h) says.
        unsafe { write_out(pmod, load_module(&text)?) }
    })
}

/// Common body of `cuModuleLoadData` / `cuModuleLoadDataEx` (kept internal so that the `Ex`
/// variant never goes through an interposed `cuModuleLoadData`).
unsafe fn load_data(pmod: *mut CUmodule, image: *const c_void) -> Res<()> {
    context::current_checked()?;
    if pmod.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    // SAFETY: `image` is passed through from the export, NULL or NUL-terminated text.
    let text = unsafe { image_text(image) }?;
    // SAFETY: `pmod` is NULL or valid for a write: `load_data`'s callers pass an export's out-
    // pointer argument.
    unsafe { write_out(pmod, load_module(&text)?) }
}

/// `cuModuleLoadData(CUmodule*, const void* image)`: image is NUL-terminated text.
#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadData(pmod: *mut CUmodule, image: *const c_void) -> CUresult {
    // SAFETY: the arguments go to `load_data` unchanged, valid as cuModuleLoadData's contract
    // (cuda.h) says.
    guard(|| unsafe { load_data(pmod, image) })
}

/// `cuModuleLoadDataEx(CUmodule*, const void* image, unsigned int numOptions,
/// CUjit_option* options, void** optionValues)`: JIT options are ignored.
#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    pmod: *mut CUmodule,
    image: *const c_void,
    _num_options: c_uint,
    _options: *mut c_int,
    _option_values: *mut *mut c_void,
) -> CUresult {
    // SAFETY: the arguments go to `load_data` unchanged, valid as cuModuleLoadDataEx's contract
    // (cuda.h) says.
    guard(|| unsafe { load_data(pmod, image) })
}

/// `cuModuleUnload(CUmodule)`. Function handles stay usable for `cuFuncGetName`.
#[no_mangle]
pub unsafe extern "C" fn cuModuleUnload(hmod: CUmodule) -> CUresult {
    guard(|| {
        context::require_init()?;
        let module = MODULES.get(hmod).ok_or(errors::INVALID_HANDLE)?;
        if let Some(ctx) = module.ctx {
            ctx.check()?;
        }
        MODULES.remove(hmod);
        Ok(())
    })
}

/// `cuModuleGetFunction(CUfunction*, CUmodule, const char* name)`: `CUDA_ERROR_NOT_FOUND` for
/// a kernel the image does not declare. The same name always gives the same handle.
#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(
    pfunc: *mut CUfunction,
    hmod: CUmodule,
    name: *const c_char,
) -> CUresult {
    guard(|| {
        context::require_init()?;
        let module = MODULES.get(hmod).ok_or(errors::INVALID_HANDLE)?;
        if let Some(ctx) = module.ctx {
            ctx.check()?;
        }
        if pfunc.is_null() || name.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        // SAFETY: not NULL, so a NUL-terminated name (the entry point's contract in cuda.h).
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        // SAFETY: `pfunc` is NULL or valid for a write, as cuModuleGetFunction's contract (cuda.h)
        // says.
        unsafe { write_out(pfunc, handle_of(module.function(&name)?)) }
    })
}

/// Libraries are context independent; a poisoned current context still fails them.
fn check_current_if_any() -> Res<()> {
    context::require_init()?;
    match context::current_raw() {
        Some(ctx) => ctx.check(),
        None => Ok(()),
    }
}

/// `cuLibraryLoadData(CUlibrary*, const void* code, CUjit_option*, void** jitOptionsValues,
/// unsigned int numJitOptions, CUlibraryOption*, void** libraryOptionValues,
/// unsigned int numLibraryOptions)`: options are ignored.
#[no_mangle]
pub unsafe extern "C" fn cuLibraryLoadData(
    plib: *mut CUlibrary,
    code: *const c_void,
    _jit_options: *mut c_int,
    _jit_option_values: *mut *mut c_void,
    _num_jit_options: c_uint,
    _library_options: *mut c_int,
    _library_option_values: *mut *mut c_void,
    _num_library_options: c_uint,
) -> CUresult {
    guard(|| {
        check_current_if_any()?;
        if plib.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        // SAFETY: NULL or NUL-terminated text (the fake's image format; cuLibraryLoadData's
        // contract says a valid image).
        let text = unsafe { image_text(code) }?;
        let library = Module::load(&text, None)?;
        // SAFETY: `plib` is NULL or valid for a write, as cuLibraryLoadData's contract (cuda.h)
        // says.
        unsafe { write_out(plib, handle_of(LIBRARIES.insert(library))) }
    })
}

/// `cuLibraryUnload(CUlibrary)`.
#[no_mangle]
pub unsafe extern "C" fn cuLibraryUnload(lib: CUlibrary) -> CUresult {
    guard(|| {
        check_current_if_any()?;
        LIBRARIES
            .remove(lib)
            .map(drop)
            .ok_or(errors::INVALID_HANDLE)
    })
}

/// `cuLibraryGetKernel(CUkernel*, CUlibrary, const char* name)`.
#[no_mangle]
pub unsafe extern "C" fn cuLibraryGetKernel(
    pkernel: *mut CUkernel,
    lib: CUlibrary,
    name: *const c_char,
) -> CUresult {
    guard(|| {
        check_current_if_any()?;
        let library = LIBRARIES.get(lib).ok_or(errors::INVALID_HANDLE)?;
        if pkernel.is_null() || name.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        // SAFETY: not NULL, so a NUL-terminated name (the entry point's contract in cuda.h).
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        // SAFETY: `pkernel` is NULL or valid for a write, as cuLibraryGetKernel's contract (cuda.h)
        // says.
        unsafe { write_out(pkernel, handle_of(library.function(&name)?)) }
    })
}

/// `cuKernelGetFunction(CUfunction*, CUkernel)`: the same handle (a kernel is a function here).
#[no_mangle]
pub unsafe extern "C" fn cuKernelGetFunction(pfunc: *mut CUfunction, kernel: CUkernel) -> CUresult {
    guard(|| {
        context::current_checked()?;
        let func = FUNCS.get(kernel).ok_or(errors::INVALID_HANDLE)?;
        // SAFETY: `pfunc` is NULL or valid for a write, as cuKernelGetFunction's contract (cuda.h)
        // says.
        unsafe { write_out(pfunc, handle_of(func)) }
    })
}

unsafe fn get_name(pname: *mut *const c_char, handle: *mut c_void) -> Res<()> {
    context::require_init()?;
    let func = FUNCS.get(handle).ok_or(errors::INVALID_HANDLE)?;
    // SAFETY: `pname` is NULL or valid for a write: `get_name`'s callers pass an export's out-
    // pointer argument.
    unsafe { write_out(pname, func.name.as_ptr()) }
}

/// `cuFuncGetName(const char**, CUfunction)`: stable NUL-terminated name. Works after a fault.
#[no_mangle]
pub unsafe extern "C" fn cuFuncGetName(pname: *mut *const c_char, func: CUfunction) -> CUresult {
    guard(|| {
        nameless()?;
        // SAFETY: `pname` goes to `get_name` unchanged: NULL or valid for a write (cuda.h).
        unsafe { get_name(pname, func) }
    })
}

/// With `FAKE_CUDA_NAMELESS=1`, `cuFuncGetName` and `cuKernelGetName` answer
/// `CUDA_ERROR_NOT_SUPPORTED`, as driver 580 did on the H200 for functions of a module loaded from
/// PTX with `cuModuleLoadData`: the name is then only known from the `cuModuleGetFunction` lookup.
/// With `FAKE_CUDA_NAMELESS=after_fault` they answer until the current context has a sticky
/// error, then return it: a driver that names nothing once the context died (cudablame must have
/// asked before, at the kernel's first launch).
fn nameless() -> crate::types::Res<()> {
    match std::env::var("FAKE_CUDA_NAMELESS") {
        Ok(v) if v == "1" => Err(crate::errors::NOT_SUPPORTED),
        Ok(v) if v == "after_fault" => crate::context::current_checked().map(|_| ()),
        _ => Ok(()),
    }
}

/// `cuKernelGetName(const char**, CUkernel)`: stable NUL-terminated name. Works after a fault.
#[no_mangle]
pub unsafe extern "C" fn cuKernelGetName(pname: *mut *const c_char, kernel: CUkernel) -> CUresult {
    guard(|| {
        nameless()?;
        // SAFETY: `pname` goes to `get_name` unchanged: NULL or valid for a write (cuda.h).
        unsafe { get_name(pname, kernel) }
    })
}
