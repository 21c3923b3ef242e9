//! What the server needs of a store beyond the Deno KV layer's seam: its own metrics, and
//! whether its reads wait on the network. Implemented for the LSM engine (the default) and
//! the etcd cluster store.

use stampkv::store::{EngineStore, Store};
use stampkv::Kv;
use stampkv_etcd::{EtcdStats, EtcdStore, LatencySummary};
use std::fmt::Write as _;

/// A store the server can serve.
pub trait ServedStore: Store {
    /// Whether reads wait on the network: then every read runs on the blocking pool,
    /// never on the async runtime's threads.
    const REMOTE_READS: bool;

    /// Whether the store serves `eventual` reads from a cheaper snapshot than strong ones
    /// ([`Store::eventual_snapshot`]): then the metadata lists an `eventual` endpoint.
    const EVENTUAL_READS: bool;

    /// Appends the store's own metrics to `out` in Prometheus' text format.
    fn render_metrics(kv: &Kv<Self>, out: &mut String)
    where
        Self: Sized;
}

impl ServedStore for EngineStore {
    const REMOTE_READS: bool = false;
    const EVENTUAL_READS: bool = false;

    fn render_metrics(kv: &Kv<Self>, out: &mut String) {
        render_engine(&kv.engine().stats(), out);
    }
}

impl ServedStore for EtcdStore {
    const REMOTE_READS: bool = true;
    const EVENTUAL_READS: bool = true;

    fn render_metrics(kv: &Kv<Self>, out: &mut String) {
        render_etcd(&kv.store().stats(), out);
    }
}

fn render_engine(stats: &stampkv::engine::Stats, out: &mut String) {
    let gauges: [(&str, u64); 19] = [
        ("engine_commits", stats.commits),
        ("engine_user_bytes_written", stats.user_bytes_written),
        ("engine_wal_bytes_written", stats.wal_bytes_written),
        ("engine_wal_syncs", stats.wal_syncs),
        ("engine_flushes", stats.flushes),
        ("engine_compactions", stats.compactions),
        ("engine_compaction_bytes_written", stats.compaction_bytes_written),
        ("engine_stalls", stats.stalls),
        ("engine_stall_micros", stats.stall_micros),
        ("engine_max_stall_micros", stats.max_stall_micros),
        ("engine_max_memtable_switch_micros", stats.max_memtable_switch_micros),
        ("engine_table_bytes", stats.table_bytes),
        ("engine_table_bytes_uncompressed", stats.table_bytes_uncompressed),
        ("engine_wal_bytes_on_disk", stats.wal_bytes_on_disk),
        ("engine_memtable_bytes", stats.memtable_bytes),
        ("engine_pooled_memtable_bytes", stats.pooled_memtable_bytes),
        ("engine_block_cache_bytes", stats.block_cache_bytes),
        ("engine_pinned_table_bytes", stats.pinned_table_bytes),
        ("engine_open_tables", stats.open_tables as u64),
    ];
    for (name, value) in gauges {
        let _ = writeln!(out, "# TYPE stampkv_{name} gauge\nstampkv_{name} {value}");
    }
    let _ = writeln!(
        out,
        "# TYPE stampkv_engine_write_amplification gauge\nstampkv_engine_write_amplification {}",
        stats.write_amplification()
    );
    out.push_str("# TYPE stampkv_engine_level_target_bytes gauge\n");
    for (level, target) in stats.level_target_bytes.iter().enumerate() {
        let _ = writeln!(out, "stampkv_engine_level_target_bytes{{level=\"{level}\"}} {target}");
    }
    out.push_str("# TYPE stampkv_engine_files gauge\n");
    for (level, files) in stats.files_per_level.iter().enumerate() {
        let _ = writeln!(out, "stampkv_engine_files{{level=\"{level}\"}} {files}");
    }
}

fn render_etcd(stats: &EtcdStats, out: &mut String) {
    let counters: [(&str, &str, u64); 9] = [
        ("etcd_commits_total", "Commits applied.", stats.commits),
        (
            "etcd_commit_batches_total",
            "etcd transactions that applied commits (group commits).",
            stats.batches,
        ),
        (
            "etcd_conflicts_total",
            "Commits built again because another server committed first.",
            stats.conflicts,
        ),
        ("etcd_retries_total", "etcd calls retried after a failure that could pass.", stats.retries),
        (
            "etcd_unknown_outcomes_total",
            "Commits whose answer was lost and had to be settled.",
            stats.unknown_outcomes,
        ),
        ("etcd_fences_total", "Settlements that fenced a lost commit off.", stats.fences),
        ("etcd_feed_events_total", "Changed keys the change feed delivered.", stats.feed_events),
        ("etcd_expired_swept_total", "Expired entries the sweeper deleted.", stats.expired_swept),
        ("etcd_compactions_total", "History compactions this server made.", stats.compactions),
    ];
    for (name, help, value) in counters {
        let _ = writeln!(
            out,
            "# HELP stampkv_{name} {help}\n# TYPE stampkv_{name} counter\nstampkv_{name} {value}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP stampkv_etcd_largest_batch Most commits one etcd transaction carried.\n\
         # TYPE stampkv_etcd_largest_batch gauge\nstampkv_etcd_largest_batch {}",
        stats.largest_batch
    );
    latency(out, "etcd_read", "etcd reads", &stats.reads);
    latency(out, "etcd_transaction", "etcd transactions", &stats.transactions);
}

fn latency(out: &mut String, name: &str, what: &str, summary: &LatencySummary) {
    let _ = writeln!(
        out,
        "# HELP stampkv_{name}_seconds Time spent in {what}.\n# TYPE stampkv_{name}_seconds summary\n\
         stampkv_{name}_seconds_sum {}\nstampkv_{name}_seconds_count {}\n\
         # TYPE stampkv_{name}_max_seconds gauge\nstampkv_{name}_max_seconds {}",
        summary.total.as_secs_f64(),
        summary.calls,
        summary.max.as_secs_f64()
    );
}
