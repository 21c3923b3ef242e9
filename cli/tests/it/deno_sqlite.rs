//! `stampkv import-deno` and `stampkv export-deno`: Deno KV's SQLite file in and out with
//! keys, values, versionstamps, expiry and queued messages intact; the exported file has
//! exactly the schema Deno 2.9.6 creates; files that are not Deno KV databases, bad rows
//! and non-empty targets are refused with one error line and nothing written.
//!
//! The files here are built with the schema as Deno 2.9.6 writes it (its `sqlite_master`
//! text below was read from a file `Deno.openKv(path)` created). `cli/e2e/run.sh` checks
//! the same against real Deno.

use crate::dump_support::{arg, contents, fails, ok};
use rusqlite::{params, Connection};
use stampkv::engine::{Options, SyncMode};
use stampkv::value::v8;
use stampkv::{key, EnqueueOptions, Key, Kv, KvOptions, KvValue, Value, Versionstamp};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `select type, name, tbl_name, sql from sqlite_master` of a file Deno 2.9.6 created.
const DENO_SCHEMA: [(&str, &str, &str, Option<&str>); 8] = [
    (
        "table",
        "migration_state",
        "migration_state",
        Some("CREATE TABLE migration_state(\n  k integer not null primary key,\n  version integer not null\n)"),
    ),
    (
        "table",
        "data_version",
        "data_version",
        Some("CREATE TABLE data_version (\n  k integer primary key,\n  version integer not null\n, seq integer not null default 0)"),
    ),
    (
        "table",
        "kv",
        "kv",
        Some("CREATE TABLE kv (\n  k blob primary key,\n  v blob not null,\n  v_encoding integer not null,\n  version integer not null\n, seq integer not null default 0, expiration_ms integer not null default -1) without rowid"),
    ),
    (
        "table",
        "queue",
        "queue",
        Some("CREATE TABLE queue (\n  ts integer not null,\n  id text not null,\n  data blob not null,\n  backoff_schedule text not null,\n  keys_if_undelivered blob not null,\n\n  primary key (ts, id)\n)"),
    ),
    ("index", "sqlite_autoindex_queue_1", "queue", None),
    (
        "table",
        "queue_running",
        "queue_running",
        Some("CREATE TABLE queue_running(\n  deadline integer not null,\n  id text not null,\n  data blob not null,\n  backoff_schedule text not null,\n  keys_if_undelivered blob not null,\n\n  primary key (deadline, id)\n)"),
    ),
    ("index", "sqlite_autoindex_queue_running_1", "queue_running", None),
    ("index", "kv_expiration_ms_idx", "kv", Some("CREATE INDEX kv_expiration_ms_idx on kv (expiration_ms)")),
];

/// A row of `kv`: k, v, v_encoding, version, seq, expiration_ms.
type KvRow = (Vec<u8>, Vec<u8>, i64, i64, i64, i64);
/// A row of `queue`: ts, id, data, backoff_schedule, keys_if_undelivered and its type.
type QueueRow = (i64, String, Vec<u8>, String, String, String);

fn schema_of(conn: &Connection) -> Vec<(String, String, String, Option<String>)> {
    let mut stmt =
        conn.prepare("select type, name, tbl_name, sql from sqlite_master order by rowid").unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A Deno KV file with Deno's schema and nothing in it.
fn deno_file(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    let _: String = conn.query_row("pragma journal_mode = wal", [], |r| r.get(0)).unwrap();
    for (_, _, _, sql) in DENO_SCHEMA {
        if let Some(sql) = sql {
            conn.execute_batch(sql).unwrap();
        }
    }
    conn.execute_batch(
        "insert into migration_state values (0, 3); insert into data_version (k, version) values (0, 0);",
    )
    .unwrap();
    assert_eq!(schema_of(&conn).len(), DENO_SCHEMA.len());
    conn
}

fn v8_of(value: &Value) -> Vec<u8> {
    v8::serialize(value).unwrap()
}

struct Row {
    key: Key,
    data: Vec<u8>,
    encoding: i64,
    version: i64,
    expiration: i64,
}

/// Rows as Deno would write them: every encoding, versions not in key order, expiry times
/// to come, passed and none.
fn sample_rows() -> Vec<Row> {
    let future = 4_102_444_800_000; // 2100-01-01
    let row = |key: Key, data: Vec<u8>, encoding, version, expiration| Row {
        key,
        data,
        encoding,
        version,
        expiration,
    };
    vec![
        row(key![&b"\x00\xff"[..]], vec![1, 2, 3], 3, 90, -1),
        row(key!["a"], v8_of(&Value::from("hello")), 1, 18, -1),
        // What Deno 2.9.6 writes for `{a: 1}`.
        row(key!["b"], vec![0xff, 0x10, 0x6f, 0x22, 0x01, b'a', 0x49, 0x02, 0x7b, 0x01], 1, 7, future),
        row(key!["c", 1.5], 258u64.to_le_bytes().to_vec(), 2, 35, -1),
        row(key!["expired"], v8_of(&Value::Null), 1, 40, 1000),
        row(key![stampkv::KvBigInt::from(-3i64), true], vec![], 3, 2, future + 1),
        row(key![f64::NAN], v8_of(&Value::Map(vec![])), 1, 3, -1),
    ]
}

fn insert_rows(conn: &Connection, rows: &[Row]) {
    for row in rows {
        conn.execute(
            "insert into kv (k, v, v_encoding, version, expiration_ms) values (?1, ?2, ?3, ?4, ?5)",
            params![row.key.encode().unwrap(), row.data, row.encoding, row.version, row.expiration],
        )
        .unwrap();
    }
}

fn keys_json(keys: &[Key]) -> String {
    serde_json::to_string(&keys.iter().map(|k| k.encode().unwrap()).collect::<Vec<_>>()).unwrap()
}

/// A populated Deno file: rows, the data version, a pending message, one a listener was
/// running, and one due later with the same due time as another (ids order them).
fn sample_file(path: &Path) -> i64 {
    let conn = deno_file(path);
    insert_rows(&conn, &sample_rows());
    conn.execute("update data_version set version = 95 where k = 0", []).unwrap();
    let due = now_ms() + 600_000;
    let queue = |table: &str, ts: i64, id: &str, value: &str, backoff: &str, keys: &[Key]| {
        conn.execute(
            &format!("insert into {table} values (?1, ?2, ?3, ?4, ?5)"),
            params![ts, id, v8_of(&Value::from(value)), backoff, keys_json(keys)],
        )
        .unwrap();
    };
    queue("queue", due, "b-uuid", "second", "[100,1000,5000,30000,60000]", &[]);
    queue("queue", due, "a-uuid", "first", "[]", &[key!["dead", 1], Key::default()]);
    queue("queue_running", due - 10, "c-uuid", "running", "[10,20]", &[]);
    due
}

#[test]
fn a_deno_file_is_imported_with_versionstamps_expiry_and_queue_and_exported_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deno.sqlite");
    let due = sample_file(&file);
    let db = dir.path().join("db");
    ok(&["import-deno", arg(&file), "--path", arg(&db)]);
    let imported = contents(&db);
    let rows: Vec<Row> = sample_rows().into_iter().filter(|r| r.key != key!["expired"]).collect();
    assert_eq!(imported.entries.len(), rows.len(), "the expired row is left out");
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| r.key.encode().unwrap());
    for (entry, row) in imported.entries.iter().zip(&sorted) {
        assert_eq!(entry.key, row.key);
        let expected = match row.encoding {
            1 => KvValue::V8(row.data.clone()),
            2 => KvValue::U64(258),
            _ => KvValue::Bytes(row.data.clone()),
        };
        assert_eq!(entry.value, expected);
        assert_eq!(
            entry.versionstamp,
            Versionstamp::from_sequence(row.version as u64),
            "Deno's versionstamp"
        );
        assert_eq!(entry.expires_at_ms, u64::try_from(row.expiration).ok());
    }
    assert_eq!(imported.last, Versionstamp::from_sequence(95), "Deno's data_version");
    let texts: Vec<Value> = imported.messages.iter().map(|m| m.value.to_value().unwrap()).collect();
    assert_eq!(texts, vec![Value::from("running"), Value::from("first"), Value::from("second")]);
    assert_eq!(imported.messages[0].deadline_ms, (due - 10) as u64);
    assert_eq!(imported.messages[0].backoff_ms, vec![10, 20]);
    assert_eq!(imported.messages[1].backoff_ms, Vec::<u32>::new());
    assert_eq!(imported.messages[1].keys_if_undelivered, vec![key!["dead", 1], Key::default()]);
    assert_eq!(imported.messages[2].backoff_ms, stampkv::DEFAULT_BACKOFF_MS.to_vec());
    // New commits get newer versionstamps than any of Deno's.
    let kv = Kv::open(&db, KvOptions::default()).unwrap();
    assert_eq!(kv.set(&key!["next"], &KvValue::U64(0)).unwrap(), Versionstamp::from_sequence(96));
    kv.delete(&key!["next"]).unwrap();
    kv.close().unwrap();

    let out = dir.path().join("out.sqlite");
    ok(&["export-deno", arg(&out), "--path", arg(&db)]);
    let conn = Connection::open(&out).unwrap();
    let expected_schema: Vec<_> = DENO_SCHEMA
        .iter()
        .map(|(t, n, tbl, sql)| (t.to_string(), n.to_string(), tbl.to_string(), sql.map(str::to_owned)))
        .collect();
    assert_eq!(schema_of(&conn), expected_schema, "exactly Deno's schema");
    let mode: String = conn.query_row("pragma journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let migration: i64 =
        conn.query_row("select version from migration_state where k = 0", [], |r| r.get(0)).unwrap();
    assert_eq!(migration, 3);
    let version: i64 =
        conn.query_row("select version from data_version where k = 0", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 97, "the database's last versionstamp");
    let mut stmt =
        conn.prepare("select k, v, v_encoding, version, seq, expiration_ms from kv order by k").unwrap();
    let exported: Vec<KvRow> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected: Vec<_> = sorted
        .iter()
        .map(|r| (r.key.encode().unwrap(), r.data.clone(), r.encoding, r.version, 0, r.expiration))
        .collect();
    assert_eq!(exported, expected, "the rows Deno wrote, byte for byte");
    let mut stmt = conn
        .prepare("select ts, id, data, backoff_schedule, keys_if_undelivered, typeof(keys_if_undelivered) from queue order by ts, id")
        .unwrap();
    let queue: Vec<QueueRow> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(queue.len(), 3);
    assert_eq!(queue[0].0, due - 10);
    assert_eq!((queue[1].0, queue[2].0), (due, due));
    assert_eq!(queue[0].2, v8_of(&Value::from("running")));
    assert_eq!(queue[1].2, v8_of(&Value::from("first")));
    assert_eq!(queue[2].2, v8_of(&Value::from("second")));
    assert_eq!(queue[0].3, "[10,20]");
    assert_eq!(queue[1].3, "[]");
    assert_eq!(queue[2].3, "[100,1000,5000,30000,60000]");
    assert_eq!(queue[1].4, keys_json(&[key!["dead", 1], Key::default()]));
    assert_eq!(queue[1].5, "text", "as Deno binds it");
    assert!(queue.iter().all(|q| q.1.len() == 36), "UUID-shaped ids");
    let running: i64 = conn.query_row("select count(*) from queue_running", [], |r| r.get(0)).unwrap();
    assert_eq!(running, 0);

    // Imported again, the exported file gives the same database.
    let again = dir.path().join("again");
    ok(&["import-deno", arg(&out), "--path", arg(&again)]);
    let reimported = contents(&again);
    assert_eq!(reimported.entries, imported.entries);
    assert_eq!(reimported.messages, imported.messages);
}

#[test]
fn queued_bytes_and_u64_values_are_exported_as_deno_serializes_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut engine = Options::default();
    engine.sync_mode = SyncMode::Buffered;
    let kv = Kv::open(&db, KvOptions::with_engine(engine)).unwrap();
    let later = EnqueueOptions { delay: Duration::from_secs(3600), ..Default::default() };
    kv.enqueue(&KvValue::Bytes(vec![1, 2]), later.clone()).unwrap();
    kv.enqueue(&KvValue::U64(5), EnqueueOptions { delay: Duration::from_secs(3601), ..later }).unwrap();
    kv.close().unwrap();
    let out = dir.path().join("out.sqlite");
    ok(&["export-deno", arg(&out), "--path", arg(&db)]);
    let conn = Connection::open(&out).unwrap();
    let mut stmt = conn.prepare("select data from queue order by ts").unwrap();
    let data: Vec<Vec<u8>> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    // What Deno 2.9.6 stores for `enqueue(new Uint8Array([1, 2]))` and for
    // `enqueue(new Deno.KvU64(5n))`, after the header (stampkv writes `ff 0f`, Deno `ff 10`).
    assert_eq!(data[0][2..], [0x42, 0x02, 0x01, 0x02, 0x56, 0x42, 0x00, 0x02, 0x00]);
    assert_eq!(
        data[1][2..],
        [0x6f, 0x22, 0x05, b'v', b'a', b'l', b'u', b'e', 0x5a, 0x10, 5, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x01]
    );
}

#[test]
fn an_existing_file_is_replaced_only_when_forced_and_its_log_goes_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let kv = Kv::open(&db, KvOptions::default()).unwrap();
    kv.set(&key!["k"], &Value::from("new")).unwrap();
    kv.close().unwrap();
    let out = dir.path().join("out.sqlite");
    std::fs::write(&out, b"precious").unwrap();
    fails(&["export-deno", arg(&out), "--path", arg(&db)], "already exists: pass --force");
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    // A stale write-ahead log of the old file must not be applied to the new one.
    std::fs::write(dir.path().join("out.sqlite-wal"), b"stale log").unwrap();
    ok(&["export-deno", arg(&out), "--path", arg(&db), "--force"]);
    assert!(!dir.path().join("out.sqlite-wal").exists());
    let conn = Connection::open(&out).unwrap();
    let v: Vec<u8> = conn.query_row("select v from kv", [], |r| r.get(0)).unwrap();
    assert_eq!(v, v8_of(&Value::from("new")));
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("stampkv-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    fails(&["export-deno", arg(dir.path()), "--path", arg(&db), "--force"], "is a directory");
    fails(
        &["export-deno", arg(&dir.path().join("x.sqlite")), "--path", arg(&dir.path().join("nope"))],
        "does not exist",
    );
    assert!(!dir.path().join("x.sqlite").exists());
}

#[test]
fn files_that_are_not_deno_kv_databases_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let missing = dir.path().join("missing.sqlite");
    fails(&["import-deno", arg(&missing), "--path", arg(&db)], "does not exist");
    let text = dir.path().join("text.sqlite");
    std::fs::write(&text, "this is not SQLite, but it is long enough to have a header of a hundred bytes or so....................").unwrap();
    fails(&["import-deno", arg(&text), "--path", arg(&db)], "is not a SQLite database");
    let other = dir.path().join("other.sqlite");
    Connection::open(&other)
        .unwrap()
        .execute_batch("create table notes (t text); insert into notes values ('x');")
        .unwrap();
    fails(
        &["import-deno", arg(&other), "--path", arg(&db)],
        "is not a Deno KV database: it has no table `migration_state`, `data_version`, `kv`",
    );
    let old = dir.path().join("old.sqlite");
    deno_file(&old).execute("update migration_state set version = 2", []).unwrap();
    fails(&["import-deno", arg(&old), "--path", arg(&db)], "schema version 2");
    fails(&["import-deno", arg(dir.path()), "--path", arg(&db)], "not a file");
    assert!(!db.exists(), "nothing created for a refused file");
}

#[test]
fn bad_rows_fail_the_import_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, &str)> = vec![
        (
            "insert into kv (k, v, v_encoding, version) values (x'027a00', x'00', 4, 1)",
            "key 027a00: the value encoding 4 is unknown",
        ),
        (
            "insert into kv (k, v, v_encoding, version) values (x'027a00', x'0100', 2, 1)",
            "a KvU64 value must be 8 bytes, found 2",
        ),
        (
            "insert into kv (k, v, v_encoding, version) values (x'027a00', x'00', 3, 0)",
            "version 0 is not a versionstamp",
        ),
        (
            "insert into kv (k, v, v_encoding, version) values (x'027a00', x'00', 3, 72057594037927936)",
            "outside 1..=",
        ),
        ("insert into kv (k, v, v_encoding, version) values (x'0299', x'00', 3, 1)", "key 0299"),
        ("insert into kv (k, v, v_encoding, version) values ('text key', x'00', 3, 1)", "not a blob"),
        (
            "insert into queue values (5, 'id', x'ff0f5f', '[1,\"x\"]', '[]')",
            "queued message id: backoff_schedule is not a JSON array",
        ),
        ("insert into queue values (5, 'id', x'ff0f5f', '[]', '[[41]]')", "undelivered key 29 is not a key"),
        ("insert into queue values (-5, 'id', x'ff0f5f', '[]', '[]')", "due time -5 is negative"),
    ];
    for (i, (sql, expected)) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.sqlite"));
        let conn = deno_file(&file);
        insert_rows(&conn, &sample_rows()[..2]);
        conn.execute_batch(sql).unwrap();
        drop(conn);
        let db = dir.path().join(format!("db{i}"));
        fails(&["import-deno", arg(&file), "--path", arg(&db)], expected);
        let left = contents(&db);
        assert!(left.entries.is_empty() && left.messages.is_empty(), "case {i}: something was imported");
    }
}

#[test]
fn importing_into_a_database_with_data_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deno.sqlite");
    sample_file(&file);
    let db = dir.path().join("db");
    let kv = Kv::open(&db, KvOptions::default()).unwrap();
    for i in 0..5 {
        kv.set(&key!["mine"], &KvValue::U64(i)).unwrap();
    }
    kv.close().unwrap();
    let before = contents(&db);
    assert_eq!(before.last, Versionstamp::from_sequence(5));
    fails(&["import-deno", arg(&file), "--path", arg(&db)], "already holds data: pass --force");
    assert_eq!(contents(&db), before);
    // Deno's versions 2 and 3 are not newer than the database's last commit (5).
    fails(&["import-deno", arg(&file), "--path", arg(&db), "--force"], "use --new-versionstamps");
    assert_eq!(contents(&db), before);
    ok(&["import-deno", arg(&file), "--path", arg(&db), "--force", "--new-versionstamps"]);
    let after = contents(&db);
    assert_eq!(after.entries.len(), 1 + 6);
    assert_eq!(after.messages.len(), 3);
    let mine = after.entries.iter().find(|e| e.key == key!["mine"]).unwrap();
    assert_eq!((mine.versionstamp, &mine.value), (Versionstamp::from_sequence(5), &KvValue::U64(4)));
    assert!(after
        .entries
        .iter()
        .filter(|e| e.key != key!["mine"])
        .all(|e| e.versionstamp == Versionstamp::from_sequence(6)));

    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("x"), b"x").unwrap();
    fails(&["import-deno", arg(&file), "--path", arg(&foreign)], "not a stampkv database and not empty");
    // New versionstamps, no expiry, no queue.
    let plain = dir.path().join("plain");
    ok(&[
        "import-deno",
        arg(&file),
        "--path",
        arg(&plain),
        "--new-versionstamps",
        "--no-expiry",
        "--no-queue",
    ]);
    let plain = contents(&plain);
    assert!(plain.messages.is_empty());
    assert!(plain
        .entries
        .iter()
        .all(|e| e.expires_at_ms.is_none() && e.versionstamp == Versionstamp::from_sequence(1)));
    assert_eq!(plain.entries.len(), 6);
}
