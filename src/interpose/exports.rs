//! The exported driver entry points, one `#[no_mangle]` wrapper per variant in the list of
//! `cuda::entry_points`, generated here. Each wrapper forwards to [`super::hook`] with a closure
//! that describes the call and one that makes the real call.

#![allow(non_snake_case, clippy::too_many_arguments, clippy::missing_safety_doc)]

use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use std::ffi::{c_char, c_uint, c_void};

/// `$item` in the hot code section (`cudablame_hot_text`, see lib.rs) when its entry point is
/// a kernel launch (`$ctor` `kernel` or `kernel_ex`), the commonest op: its wrapper sits beside
/// the hook's code. Other entry points' wrappers stay where the compiler puts them.
macro_rules! in_hot_text_if_launch {
    (kernel, $item:item) => {
        #[link_section = "cudablame_hot_text"]
        $item
    };
    (kernel_ex, $item:item) => {
        #[link_section = "cudablame_hot_text"]
        $item
    };
    ($other:ident, $item:item) => {
        $item
    };
}

macro_rules! export_one {
    ($v:ident ($($p:ident : $t:ty),* $(,)?) $ctor:ident ($($a:expr),* $(,)?)) => {
        in_hot_text_if_launch!($ctor,
        #[doc = concat!("Hooked `", stringify!($v), "` (see `cuda.h`); returns exactly what the real one returns.")]
        #[cfg_attr(not(test), no_mangle)]
        #[allow(unused_unsafe)] // Only some `Call` constructors are unsafe.
        pub unsafe extern "C" fn $v($($p: $t),*) -> CUresult {
            // Passed by reference, which also keeps this frame alive (no tail call) while the
            // hook unwinds from it.
            let entry = crate::stack::EntryRegs::here();
            super::hook(
                EntryPoint::$v,
                &entry,
                // SAFETY: the unsafe constructors read the descriptor or launch config the
                // program passed, which the call's contract (`cuda.h`) makes NULL or valid.
                || unsafe { crate::record::Call::$ctor($($a),*) },
                // By value (the arguments are plain words): the closure holds them, not
                // references to the wrapper's copies of them (fewer stores and loads per call).
                move |real: usize| {
                    // SAFETY: `real` is the driver's function of this exact name and signature.
                    let f: unsafe extern "C" fn($($t),*) -> CUresult = unsafe { std::mem::transmute(real) };
                    // SAFETY: the program's own arguments, passed on unchanged to that function.
                    unsafe { f($($p),*) }
                },
            )
        }
        );
    };
}

macro_rules! export_variants {
    ([] $params:tt $ctor:ident $args:tt) => {};
    ([$v:ident : $sd:ident $(, $rv:ident : $rsd:ident)*] $params:tt $ctor:ident $args:tt) => {
        export_one!($v $params $ctor $args);
        export_variants!([$($rv : $rsd),*] $params $ctor $args);
    };
}

macro_rules! define_exports {
    ($( [$($v:ident : $sd:ident),+] $params:tt => $ctor:ident $args:tt; )*) => {
        $( export_variants!([$($v : $sd),+] $params $ctor $args); )*

        /// The address of our wrapper for `ep`.
        pub(crate) fn wrapper_address(ep: EntryPoint) -> usize {
            match ep { $($( EntryPoint::$v => $v as *const () as usize, )+)* }
        }
    };
}

crate::for_each_entry_point!(define_exports);
