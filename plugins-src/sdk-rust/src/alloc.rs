//! On wasm32 (feature `bump-allocator`, on by default): a bump allocator that never returns
//! memory to a free list. Each instance serves one hook call and is then discarded by the host,
//! so freeing is wasted work; this keeps modules smaller and calls faster than dlmalloc. The
//! most recent allocation can still grow in place (a growing `Vec`) or be given back.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::Cell;
use core::ptr;

const PAGE: usize = 65536;

extern "C" {
    /// Defined by wasm-ld: the first byte after the stack and the static data.
    static __heap_base: u8;
}

pub struct Bump {
    next: Cell<usize>,
    end: Cell<usize>,
}

// SAFETY: wasm32-unknown-unknown modules built by this SDK are single-threaded.
unsafe impl Sync for Bump {}

impl Bump {
    /// Make `[.., new_next)` usable, growing memory when needed (by what is missing, rounded
    /// up to whole pages: a call's memory stays as small as it can, and the host resets less).
    fn reserve(&self, new_next: usize) -> bool {
        if new_next <= self.end.get() {
            return true;
        }
        let pages = (new_next - self.end.get() + PAGE - 1) / PAGE;
        if wasm32::memory_grow(0, pages) == usize::MAX {
            return false;
        }
        self.end.set(self.end.get() + pages * PAGE);
        true
    }
}

unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.end.get() == 0 {
            // First use: the heap starts where the linker put the end of the stack and the
            // data (`__heap_base`), so the rest of the initial memory is used before growing.
            // Only the symbol's address is taken (this is an unsafe fn).
            let base = &__heap_base as *const u8 as usize;
            self.next.set(base);
            self.end.set(wasm32::memory_size(0) * PAGE);
        }
        let align = layout.align();
        let start = match self.next.get().checked_add(align - 1) {
            Some(x) => x & !(align - 1),
            None => return ptr::null_mut(),
        };
        let new_next = match start.checked_add(layout.size()) {
            Some(x) => x,
            None => return ptr::null_mut(),
        };
        if !self.reserve(new_next) {
            return ptr::null_mut();
        }
        self.next.set(new_next);
        start as *mut u8
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if p as usize + layout.size() == self.next.get() {
            self.next.set(p as usize);
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_end = p as usize + layout.size();
        if old_end == self.next.get() {
            if let Some(new_next) = (p as usize).checked_add(new_size) {
                if self.reserve(new_next) {
                    self.next.set(new_next);
                    return p;
                }
            }
            return ptr::null_mut();
        }
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let q = self.alloc(new_layout);
        if !q.is_null() {
            ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Bump = Bump {
    next: Cell::new(0),
    end: Cell::new(0),
};
