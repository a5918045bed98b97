//! Handle registries.
//!
//! Every object the fake hands out (context, stream, event, module, function, graph, ...) is a
//! leaked `Box`, so its address stays valid for the life of the process, even after the object
//! is "destroyed"; it is never reused, except graphs, executable graphs, contexts and user
//! streams under `FAKE_CUDA_REUSE_HANDLES=1` (`capture::new_graph`, `context::Context::create`,
//! `stream::Stream::spawn`), which re-register a destroyed object. A [`Registry`] records which addresses are live handles
//! of one kind; an incoming handle is dereferenced only if its registry knows it, so garbage or
//! destroyed handles produce `CUDA_ERROR_INVALID_HANDLE` instead of a crash.

use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::ffi::c_void;
use std::marker::PhantomData;

/// The set of live handles of one object type `T`.
pub struct Registry<T: 'static> {
    live: Mutex<BTreeSet<usize>>,
    _marker: PhantomData<fn() -> T>,
}

impl<T: 'static> Registry<T> {
    /// An empty registry (usable in a `static`).
    pub const fn new() -> Self {
        Registry {
            live: parking_lot::const_mutex(BTreeSet::new()),
            _marker: PhantomData,
        }
    }

    /// Leaks `value` and registers its address as a live handle.
    pub fn insert(&self, value: T) -> &'static T {
        let object: &'static T = Box::leak(Box::new(value));
        self.add(object);
        object
    }

    /// Registers an already leaked object as a live handle.
    pub fn add(&self, object: &'static T) {
        self.live.lock().insert(object as *const T as usize);
    }

    /// The object behind `handle`, if `handle` is a live handle of this registry.
    pub fn get(&self, handle: *const c_void) -> Option<&'static T> {
        if handle.is_null() || !self.live.lock().contains(&(handle as usize)) {
            return None;
        }
        // SAFETY: registered addresses come from `Box::leak` of a `T` and are never freed.
        Some(unsafe { &*(handle as *const T) })
    }

    /// Every live object, in address order.
    pub fn live(&self) -> Vec<&'static T> {
        let live = self.live.lock();
        // SAFETY: as in `get`: registered addresses are leaked `T`s, never freed.
        live.iter().map(|&a| unsafe { &*(a as *const T) }).collect()
    }

    /// Unregisters `handle`; returns the object if it was live.
    pub fn remove(&self, handle: *const c_void) -> Option<&'static T> {
        if handle.is_null() || !self.live.lock().remove(&(handle as usize)) {
            return None;
        }
        // SAFETY: as in `get`.
        Some(unsafe { &*(handle as *const T) })
    }
}

impl<T: 'static> Default for Registry<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The C handle value of a leaked object.
pub fn handle_of<T>(object: &'static T) -> *mut c_void {
    object as *const T as *mut c_void
}
