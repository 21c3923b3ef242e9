//! A first program on the stampkv engine: open a database, commit batches, read them back,
//! scan ranges both ways, use a snapshot, let entries expire, reopen, print statistics.
//!
//! `cargo run --release -p stampkv-engine --example engine_quickstart [directory]`
//! (without a directory it uses a fresh temporary one and removes it afterwards).

use stampkv_engine::{Db, Options, WriteBatch};
use std::time::{SystemTime, UNIX_EPOCH};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temporary = std::env::temp_dir().join(format!("stampkv-quickstart-{}", std::process::id()));
    let dir = std::env::args().nth(1).map_or(temporary.clone(), Into::into);
    println!("database directory: {}", dir.display());

    let db = Db::open(&dir, Options::default())?;

    // One batch: atomic, one sequence number, durable when write returns (the default).
    let mut batch = WriteBatch::new();
    for (id, name) in [(1, "ada"), (2, "grace"), (3, "edsger"), (4, "barbara")] {
        batch.put(format!("user/{id:04}").as_bytes(), name.as_bytes());
    }
    let seq = db.write(batch)?;
    println!("committed 4 users at sequence {seq}");

    let snapshot = db.snapshot();
    db.put(b"user/0002", b"grace hopper")?;
    db.delete(b"user/0003")?;

    println!("now:      user/0002 = {:?}", text(db.get(b"user/0002")?));
    println!("snapshot: user/0002 = {:?}", text(snapshot.get(b"user/0002")?));

    println!("users, forward:");
    for entry in db.range(b"user/".as_slice()..b"user0".as_slice()) {
        let entry = entry?;
        println!(
            "  {} = {} (seq {})",
            String::from_utf8_lossy(&entry.key),
            String::from_utf8_lossy(&entry.value),
            entry.seq
        );
    }
    println!("users, backward, as of the snapshot:");
    for entry in snapshot.range(b"user/".as_slice()..b"user0".as_slice()).rev() {
        let entry = entry?;
        println!("  {} = {}", String::from_utf8_lossy(&entry.key), String::from_utf8_lossy(&entry.value));
    }
    drop(snapshot);

    // An entry that expires one second from now.
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    let mut batch = WriteBatch::new();
    batch.put_expiring(b"session/abc", b"token", now_ms + 1_000);
    db.write(batch)?;
    println!("session before expiry: {:?}", text(db.get(b"session/abc")?));
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    println!("session after expiry:  {:?}", text(db.get(b"session/abc")?));

    // Bulk load, then flush and compact so the data lands in tables.
    let mut batch = WriteBatch::new();
    for i in 0..50_000u32 {
        batch.put(format!("item/{i:08}").as_bytes(), &[i as u8; 100]);
        if batch.len() == 1_000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.flush()?;
    db.compact()?;
    let stats = db.stats();
    println!(
        "after 50,000 items: tables per level {:?}, {} table bytes, write amplification {:.2}",
        stats.files_per_level,
        stats.table_bytes,
        stats.write_amplification()
    );
    db.close()?;

    // Everything is still there after a reopen.
    let db = Db::open(&dir, Options::default())?;
    let items = db.range(b"item/".as_slice()..b"item0".as_slice()).count();
    println!("after reopen: {items} items, user/0001 = {:?}", text(db.get(b"user/0001")?));
    assert_eq!(items, 50_000);
    db.close()?;
    if dir == temporary {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

fn text(value: Option<Vec<u8>>) -> Option<String> {
    value.map(|v| String::from_utf8_lossy(&v).into_owned())
}
