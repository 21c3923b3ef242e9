//! What the kv tests share: the two stores every store-independent test runs on.
//!
//! [`for_each_store!`] expands a list of tests twice: in a module `engine`, over the LSM
//! engine (`EngineStore`, in memory), and in a module `memory`, over the optimistic
//! reference store (`MemoryStore`). Inside, `TestStore` is the store, `TestKv` the
//! database type and `open_kv(options)` opens an empty database (with the options' clock
//! and limits).

use stampkv::store::{Store, StoreCursor, StoreSnapshot};
use stampkv::Kv;

/// Expands the tests given once per store; see the module documentation.
macro_rules! for_each_store {
    ($($body:tt)*) => {
        mod engine {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type TestStore = stampkv::store::EngineStore;
            #[allow(dead_code)]
            type TestKv = stampkv::Kv<TestStore>;
            #[allow(dead_code)]
            fn open_kv(options: stampkv::KvOptions) -> TestKv {
                stampkv::Kv::open_in_memory(options).unwrap()
            }
            $($body)*
        }
        mod memory {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type TestStore = stampkv::store::MemoryStore;
            #[allow(dead_code)]
            type TestKv = stampkv::Kv<TestStore>;
            #[allow(dead_code)]
            fn open_kv(options: stampkv::KvOptions) -> TestKv {
                let store = stampkv::store::MemoryStore::new(options.engine.clock.clone());
                stampkv::Kv::with_store(store, options.limits)
            }
            $($body)*
        }
    };
}
pub(crate) use for_each_store;

/// The version of the last commit applied (the counter inside versionstamps).
pub fn last_version<S: Store>(kv: &Kv<S>) -> u64 {
    kv.store().snapshot().version()
}

/// How many raw store entries lie in `start..end` (the queue's records under `0xFF`, say).
pub fn count_raw<S: Store>(kv: &Kv<S>, start: &[u8], end: &[u8]) -> usize {
    let mut cursor = kv.store().snapshot().cursor(start, end, false);
    let mut n = 0;
    while cursor.advance().unwrap() {
        n += 1;
    }
    n
}
