//! Deno KV's SQLite file — what `Deno.openKv(path)` keeps (Deno 2.9.6, denokv's SQLite
//! backend, schema version 3) — read into a restore and written from a snapshot.
//!
//! The file's tables (`../shared/reference/deno-kv-semantics.md` §6 and §8, and
//! `cli/FORMAT.md`, section "Deno's SQLite file"):
//!
//! - `kv(k, v, v_encoding, version, seq, expiration_ms)`: `k` is the key's encoding, the
//!   same bytes stampkv stores; `v_encoding` 1 = V8, 2 = `KvU64` (8 bytes little-endian),
//!   3 = bytes, as stampkv's stored form; `version` is the versionstamp's 8-byte counter
//!   (its last two bytes are always zero); `expiration_ms` is the expiry time in
//!   milliseconds since the Unix epoch, or -1.
//! - `data_version(k = 0, version, seq)`: the last version handed out.
//! - `queue(ts, id, data, backoff_schedule, keys_if_undelivered)`: pending messages, due at
//!   `ts`; `data` is the V8 serialization of the value, `backoff_schedule` a JSON array of
//!   milliseconds, `keys_if_undelivered` a JSON array of key encodings (arrays of bytes).
//! - `queue_running(deadline, ...)`: messages a listener was handling, the same columns.
//! - `migration_state(k = 0, version = 3)`.
//!
//! Versionstamps map one to one: Deno's `version` is stampkv's sequence number, so an
//! entry reads back with the same 20 hex digits on both sides.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use stampkv::store::Store;
use stampkv::value::v8;
use stampkv::{BulkSnapshot, Key, KvValue, QueuedMessage, Restore, Value, Versionstamp};
use std::path::{Path, PathBuf};

/// The schema version (`migration_state`) Deno 2.9.6 writes and this module reads.
pub const SCHEMA_VERSION: i64 = 3;

/// The statements that create Deno 2.9.6's schema, in Deno's order: the migration table,
/// then its three migrations (the columns added by the third come last in their tables,
/// as `ALTER TABLE` puts them). SQLite keeps each table's text, so the file's schema is
/// byte for byte the one Deno creates.
const SCHEMA: &str = "
create table if not exists migration_state(
  k integer not null primary key,
  version integer not null
);
create table data_version (
  k integer primary key,
  version integer not null
);
create table kv (
  k blob primary key,
  v blob not null,
  v_encoding integer not null,
  version integer not null
) without rowid;
create table queue (
  ts integer not null,
  id text not null,
  data blob not null,
  backoff_schedule text not null,
  keys_if_undelivered blob not null,

  primary key (ts, id)
);
create table queue_running(
  deadline integer not null,
  id text not null,
  data blob not null,
  backoff_schedule text not null,
  keys_if_undelivered blob not null,

  primary key (deadline, id)
);
alter table kv add column seq integer not null default 0;
alter table data_version add column seq integer not null default 0;
alter table kv add column expiration_ms integer not null default -1;
create index kv_expiration_ms_idx on kv (expiration_ms);
";

/// The tables a Deno KV file has.
const TABLES: [&str; 5] = ["migration_state", "data_version", "kv", "queue", "queue_running"];

/// What to keep when importing.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportOptions {
    /// Give every entry the restore's own versionstamp instead of Deno's.
    pub new_versionstamps: bool,
    /// Import entries without their expiry times.
    pub no_expiry: bool,
    /// Leave the queue out.
    pub no_queue: bool,
}

/// What an import read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportCounts {
    /// Entries given to the restore.
    pub entries: u64,
    /// Entries left out because they had expired (Deno deletes them too).
    pub expired: u64,
    /// Queued messages given to the restore (pending and running ones).
    pub messages: u64,
    /// Deno's `data_version`: the last versionstamp it handed out.
    pub data_version: u64,
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportCounts {
    /// Rows of `kv`.
    pub entries: u64,
    /// Rows of `queue`.
    pub messages: u64,
}

fn hex(bytes: &[u8]) -> String {
    let shown: String = bytes.iter().take(64).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > 64 {
        shown + "..."
    } else {
        shown
    }
}

/// Opens a Deno KV file read-only and checks its schema.
pub fn open(path: &Path) -> Result<Connection, String> {
    let shown = path.display();
    if !path.is_file() {
        return Err(format!("{shown} does not exist or is not a file"));
    }
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|e| format!("cannot open {shown}: {e}"))?;
    let names: Vec<String> = conn
        .prepare("select name from sqlite_master where type = 'table'")
        .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
        .map_err(|e| match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase) => format!("{shown} is not a SQLite database"),
            _ => format!("cannot read {shown}: {e}"),
        })?;
    let missing: Vec<&str> = TABLES.iter().copied().filter(|t| !names.iter().any(|n| n == t)).collect();
    if !missing.is_empty() {
        return Err(format!(
            "{shown} is not a Deno KV database: it has no table {}",
            missing.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    let version: Option<i64> = conn
        .query_row("select version from migration_state where k = 0", [], |row| row.get(0))
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            other => Err(other),
        })
        .map_err(|e| format!("{shown} is not a Deno KV database: {e}"))?;
    if version != Some(SCHEMA_VERSION) {
        return Err(format!(
            "{shown} has Deno KV schema version {}, this stampkv reads version {SCHEMA_VERSION} (what Deno 2 writes): open it once with a current Deno to upgrade it",
            version.map_or("(none)".into(), |v| v.to_string())
        ));
    }
    Ok(conn)
}

/// Rows an import reads (entries and messages), for a progress bar.
pub fn count_rows(conn: &Connection) -> Result<u64, String> {
    conn.query_row(
        "select (select count(*) from kv) + (select count(*) from queue) + (select count(*) from queue_running)",
        [],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n.max(0) as u64)
    .map_err(|e| format!("counting rows: {e}"))
}

fn not_deno(e: rusqlite::Error) -> String {
    format!("not a Deno KV database: {e}")
}

/// Reads every entry and queued message of the file into `restore`; `now_ms` decides what
/// has expired. `progress` is told of every row read.
pub fn import<S: Store>(
    conn: &Connection,
    restore: &mut Restore<'_, S>,
    options: ImportOptions,
    now_ms: u64,
    mut progress: impl FnMut(u64),
) -> Result<ImportCounts, String> {
    let mut counts = ImportCounts::default();
    let data_version: i64 = conn
        .query_row("select version from data_version where k = 0", [], |row| row.get(0))
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(0),
            other => Err(other),
        })
        .map_err(not_deno)?;
    counts.data_version =
        u64::try_from(data_version).map_err(|_| format!("data_version {data_version} is negative"))?;
    let mut stmt = conn
        .prepare("select k, v, v_encoding, version, expiration_ms from kv order by k")
        .map_err(not_deno)?;
    let mut rows = stmt.query([]).map_err(not_deno)?;
    while let Some(row) = rows.next().map_err(|e| format!("reading kv: {e}"))? {
        let cell = |i: usize| row.get_ref(i).map_err(|e| format!("reading kv: {e}"));
        let ValueRef::Blob(key) = cell(0)? else {
            return Err(format!("a row of kv has a key that is not a blob ({:?})", cell(0)?.data_type()));
        };
        let at = || format!("key {}", hex(key));
        let ValueRef::Blob(data) = cell(1)? else {
            return Err(format!("{}: the value is not a blob", at()));
        };
        let integer = |i: usize, what: &str| match cell(i)? {
            ValueRef::Integer(n) => Ok(n),
            other => Err(format!("{}: {what} is not an integer ({:?})", at(), other.data_type())),
        };
        let encoding = integer(2, "v_encoding")?;
        let version = integer(3, "version")?;
        let expiration_ms = integer(4, "expiration_ms")?;
        progress(1);
        let expires_at_ms = u64::try_from(expiration_ms).ok();
        if expires_at_ms.is_some_and(|at| at <= now_ms) {
            counts.expired += 1;
            continue;
        }
        let value = match encoding {
            1 => KvValue::V8(data.to_vec()),
            2 => {
                let bytes: [u8; 8] = data
                    .try_into()
                    .map_err(|_| format!("{}: a KvU64 value must be 8 bytes, found {}", at(), data.len()))?;
                KvValue::U64(u64::from_le_bytes(bytes))
            }
            3 => KvValue::Bytes(data.to_vec()),
            n => return Err(format!("{}: the value encoding {n} is unknown", at())),
        };
        let versionstamp = if options.new_versionstamps {
            None
        } else {
            let seq = u64::try_from(version)
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| format!("{}: version {version} is not a versionstamp", at()))?;
            Some(Versionstamp::from_sequence(seq))
        };
        let expires_at_ms = if options.no_expiry { None } else { expires_at_ms };
        restore
            .entry_encoded(key, &value, versionstamp, expires_at_ms)
            .map_err(|e| format!("{}: {e}", at()))?;
        counts.entries += 1;
    }
    drop(rows);
    if options.no_queue {
        return Ok(counts);
    }
    let mut stmt = conn
        .prepare(
            "select ts, id, data, backoff_schedule, keys_if_undelivered from queue
             union all
             select deadline, id, data, backoff_schedule, keys_if_undelivered from queue_running
             order by 1, 2",
        )
        .map_err(not_deno)?;
    let mut rows = stmt.query([]).map_err(not_deno)?;
    while let Some(row) = rows.next().map_err(|e| format!("reading the queue: {e}"))? {
        let cell = |i: usize| row.get_ref(i).map_err(|e| format!("reading the queue: {e}"));
        let id = match cell(1)? {
            ValueRef::Text(id) => String::from_utf8_lossy(id).into_owned(),
            _ => "(not text)".into(),
        };
        let at = || format!("queued message {id}");
        let ValueRef::Integer(ts) = cell(0)? else {
            return Err(format!("{}: its due time is not an integer", at()));
        };
        let deadline_ms = u64::try_from(ts).map_err(|_| format!("{}: due time {ts} is negative", at()))?;
        let ValueRef::Blob(data) = cell(2)? else {
            return Err(format!("{}: its payload is not a blob", at()));
        };
        let text = |i: usize, what: &str| match cell(i)? {
            ValueRef::Text(t) | ValueRef::Blob(t) => Ok(t),
            _ => Err(format!("{}: {what} is not JSON text", at())),
        };
        let backoff: Option<Vec<u32>> = serde_json::from_slice(text(3, "backoff_schedule")?)
            .map_err(|e| format!("{}: backoff_schedule is not a JSON array of milliseconds: {e}", at()))?;
        let keys: Vec<Vec<u8>> = serde_json::from_slice(text(4, "keys_if_undelivered")?)
            .map_err(|e| format!("{}: keys_if_undelivered is not a JSON array of keys: {e}", at()))?;
        let keys_if_undelivered = keys
            .iter()
            .map(|k| {
                Key::decode(k).map_err(|e| format!("{}: undelivered key {} is not a key: {e}", at(), hex(k)))
            })
            .collect::<Result<_, _>>()?;
        progress(1);
        let message = QueuedMessage {
            deadline_ms,
            attempts: 0,
            value: KvValue::V8(data.to_vec()),
            backoff_ms: backoff.unwrap_or_else(|| stampkv::DEFAULT_BACKOFF_MS.to_vec()),
            keys_if_undelivered,
        };
        restore.message(&message).map_err(|e| format!("{}: {e}", at()))?;
        counts.messages += 1;
    }
    Ok(counts)
}

/// The V8 serialization Deno keeps for a queued value (Deno always serializes what it
/// enqueues): a plain byte array is a `Uint8Array`, a `KvU64` the object `{ value: n }`
/// its class serializes to.
fn queue_payload(value: &KvValue) -> Result<Vec<u8>, String> {
    let as_value = match value {
        KvValue::V8(bytes) => return Ok(bytes.clone()),
        KvValue::Bytes(bytes) => Value::Bytes(bytes.clone()),
        KvValue::U64(n) => Value::Object(vec![("value".into(), Value::BigInt((*n).into()))]),
    };
    v8::serialize(&as_value).map_err(|e| format!("a queued value cannot be serialized for Deno: {e}"))
}

/// A message id in the form of Deno's (a UUID), from a counter, so that messages due at
/// the same time keep their order.
fn message_id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{:012x}", n & 0xFFFF_FFFF_FFFF)
}

/// Paths SQLite may keep next to a database file.
fn companions(path: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [with("-wal"), with("-shm"), with("-journal")]
}

fn remove_if_present(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
    }
}

/// Writes everything `snapshot` holds as a new Deno KV file at `path` (built beside it and
/// renamed into place, so a failure leaves no half-written file). An existing file is
/// refused unless `replace`. `progress` is told of every row written.
pub fn export(
    snapshot: &BulkSnapshot<impl Store>,
    path: &Path,
    replace: bool,
    mut progress: impl FnMut(u64),
) -> Result<ExportCounts, String> {
    let shown = path.display();
    if path.exists() && !replace {
        return Err(format!("{shown} already exists: pass --force to replace it"));
    }
    if path.is_dir() {
        return Err(format!("{shown} is a directory"));
    }
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(".stampkv-tmp");
    let temp = PathBuf::from(temp_name);
    let cleanup = |temp: &Path| {
        let _ = std::fs::remove_file(temp);
        for companion in companions(temp) {
            let _ = std::fs::remove_file(companion);
        }
    };
    cleanup(&temp);
    let result = write_file(snapshot, &temp, &mut progress);
    let counts = match result {
        Ok(counts) => counts,
        Err(e) => {
            cleanup(&temp);
            return Err(e);
        }
    };
    // A replaced database's log must not be applied to the new file.
    for stale in companions(path) {
        remove_if_present(&stale)?;
    }
    std::fs::rename(&temp, path).map_err(|e| {
        cleanup(&temp);
        format!("cannot move the new file to {shown}: {e}")
    })?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
    }
    Ok(counts)
}

fn write_file(
    snapshot: &BulkSnapshot<impl Store>,
    temp: &Path,
    progress: &mut impl FnMut(u64),
) -> Result<ExportCounts, String> {
    let shown = temp.display();
    let sql = |e: rusqlite::Error| format!("writing {shown}: {e}");
    let mut conn = Connection::open(temp).map_err(sql)?;
    let mode: String = conn.query_row("pragma journal_mode = wal", [], |row| row.get(0)).map_err(sql)?;
    if mode != "wal" {
        return Err(format!("writing {shown}: SQLite refused the WAL journal mode ({mode})"));
    }
    conn.execute_batch("pragma synchronous = off").map_err(sql)?;
    let mut counts = ExportCounts::default();
    let tx = conn.transaction().map_err(sql)?;
    tx.execute_batch(SCHEMA).map_err(sql)?;
    tx.execute("replace into migration_state (k, version) values (0, ?1)", [SCHEMA_VERSION]).map_err(sql)?;
    let last = i64::try_from(snapshot.last_versionstamp().sequence())
        .map_err(|_| "last versionstamp too large".to_owned())?;
    tx.execute("insert into data_version (k, version) values (0, ?1)", [last]).map_err(sql)?;
    {
        let mut insert = tx
            .prepare("insert into kv (k, v, v_encoding, version, expiration_ms) values (?1, ?2, ?3, ?4, ?5)")
            .map_err(sql)?;
        for entry in snapshot.entries() {
            let entry = entry.map_err(|e| format!("reading the database: {e}"))?;
            let key = entry.key.encode().map_err(|e| format!("encoding a key: {e}"))?;
            let (data, encoding): (Vec<u8>, i64) = match &entry.value {
                KvValue::V8(bytes) => (bytes.clone(), 1),
                KvValue::U64(n) => (n.to_le_bytes().to_vec(), 2),
                KvValue::Bytes(bytes) => (bytes.clone(), 3),
            };
            let version = i64::try_from(entry.versionstamp.sequence())
                .map_err(|_| "versionstamp too large".to_owned())?;
            let expiration = entry
                .expires_at_ms
                .map_or(Ok(-1), i64::try_from)
                .map_err(|_| "expiry time too large".to_owned())?;
            insert.execute(rusqlite::params![key, data, encoding, version, expiration]).map_err(sql)?;
            counts.entries += 1;
            progress(1);
        }
        let mut insert = tx
            .prepare(
                "insert into queue (ts, id, data, backoff_schedule, keys_if_undelivered) values (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(sql)?;
        for message in snapshot.messages() {
            let message = message.map_err(|e| format!("reading the queue: {e}"))?;
            let ts = i64::try_from(message.deadline_ms)
                .map_err(|_| "a queued message's due time is too large".to_owned())?;
            let keys = message
                .keys_if_undelivered
                .iter()
                .map(Key::encode)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("encoding an undelivered key: {e}"))?;
            let backoff = serde_json::to_string(&message.backoff_ms).map_err(|e| e.to_string())?;
            let keys = serde_json::to_string(&keys).map_err(|e| e.to_string())?;
            let data = queue_payload(&message.value)?;
            insert
                .execute(rusqlite::params![ts, message_id(counts.messages), data, backoff, keys])
                .map_err(sql)?;
            counts.messages += 1;
            progress(1);
        }
    }
    tx.commit().map_err(sql)?;
    conn.close().map_err(|(_, e)| sql(e))?;
    let file = std::fs::File::open(temp).map_err(|e| format!("reopening {shown}: {e}"))?;
    file.sync_all().map_err(|e| format!("syncing {shown}: {e}"))?;
    Ok(counts)
}
