//! What the kv suite needs to run on the cluster store: `for_each_store!` expands the
//! tests once, in a module `etcd`, over an [`EtcdStore`] on a 3-member etcd cluster that
//! this test binary starts on free loopback ports (one cluster for the binary; every
//! database under a prefix of its own).

use stampkv::store::{Store, StoreCursor, StoreSnapshot};
use stampkv::Kv;
use stampkv_etcd::{EtcdOptions, EtcdStore};
use stampkv_testkit::etcd::EtcdCluster;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The cluster every test of this binary shares.
pub fn cluster() -> &'static EtcdCluster {
    static CLUSTER: OnceLock<EtcdCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| EtcdCluster::start(3).expect("start a 3-member etcd cluster (is etcd installed?)"))
}

/// A prefix no other database of this run uses.
pub fn fresh_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("test-{}-{}/", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A store on the shared cluster under a fresh prefix, expiring on `options`' clock.
pub fn open_store(options: &stampkv::KvOptions) -> EtcdStore {
    let options = EtcdOptions::new(cluster().endpoints())
        .with_prefix(&fresh_prefix())
        .with_clock(options.engine.clock.clone());
    EtcdStore::open(options).expect("open the etcd store")
}

/// Expands the tests given once, over the cluster store.
macro_rules! for_each_store {
    ($($body:tt)*) => {
        mod etcd {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type TestStore = stampkv_etcd::EtcdStore;
            #[allow(dead_code)]
            type TestKv = stampkv::Kv<TestStore>;
            #[allow(dead_code)]
            fn open_kv(options: stampkv::KvOptions) -> TestKv {
                let store = crate::common::open_store(&options);
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

/// How many raw store entries lie in `start..end`.
pub fn count_raw<S: Store>(kv: &Kv<S>, start: &[u8], end: &[u8]) -> usize {
    let mut cursor = kv.store().snapshot().cursor(start, end, false);
    let mut n = 0;
    while cursor.advance().unwrap() {
        n += 1;
    }
    n
}
