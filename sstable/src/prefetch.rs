//! Cache-line prefetch hints: the only unsafe code of this crate, behind a safe function.

#![allow(unsafe_code, reason = "the prefetch intrinsic is an `unsafe fn`")]

/// Bytes per cache line on the processors this runs on.
const CACHE_LINE: usize = 64;

/// Asks the processor to start loading the cache line holding `address` into its caches.
/// A hint only: it has no effect on results, whatever `address` is.
#[inline]
pub fn prefetch_line<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and cannot fault, even on a null,
    // dangling or unmapped address; the pointer is never dereferenced. SSE is part of the
    // x86_64 baseline, so the instruction exists on every processor this compiles for.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Asks the processor to start loading every cache line of `bytes`.
#[inline]
pub fn prefetch_bytes(bytes: &[u8]) {
    for offset in (0..bytes.len()).step_by(CACHE_LINE) {
        prefetch_line(bytes.as_ptr().wrapping_add(offset));
    }
}
