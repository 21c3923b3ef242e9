//! A first stampkv program: open a database directory, write and read users with a unique
//! index, list with a cursor, count with `sum`, let a session expire, watch a key, reopen.
//!
//! `cargo run --release -p stampkv --example quickstart [directory]`

#![allow(
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "an example: a failed step ends it with a message"
)]

use stampkv::{key, Kv, KvError, KvOptions, KvValue, ListOptions, Selector, SetOptions, Value};
use std::time::Duration;

fn user(name: &str, email: &str) -> Value {
    Value::Object(vec![
        ("name".into(), Value::String(name.into())),
        ("email".into(), Value::String(email.into())),
    ])
}

fn main() -> Result<(), KvError> {
    let temporary = std::env::temp_dir().join(format!("stampkv-kv-quickstart-{}", std::process::id()));
    let dir = std::env::args().nth(1).map_or(temporary.clone(), Into::into);
    println!("database directory: {}", dir.display());
    let kv = Kv::open(&dir, KvOptions::default())?;

    // Insert users with a unique index by e-mail: both keys or neither.
    for (id, name, email) in
        [(1, "Ada", "ada@example.com"), (2, "Grace", "grace@example.com"), (3, "Mallory", "ada@example.com")]
    {
        let result = kv
            .atomic()
            .check(&key!["users", id], None)
            .check(&key!["users_by_email", email], None)
            .set(&key!["users", id], &user(name, email))
            .set(&key!["users_by_email", email], &user(name, email))
            .commit()?;
        println!("insert user {id} ({email}): {}", if result.ok() { "ok" } else { "refused, e-mail taken" });
    }

    let ada = kv.get::<Value>(&key!["users", 1])?;
    println!(
        "users/1 = {} at versionstamp {}",
        shown(ada.value),
        ada.versionstamp.map(|v| v.to_string()).unwrap_or_default()
    );

    // List users, one per page, resuming from the cursor.
    let mut cursor = None;
    loop {
        let options = ListOptions { limit: Some(1), cursor: cursor.take(), ..ListOptions::default() };
        let mut page = kv.list::<Value>(&Selector::prefix(key!["users"]), &options)?;
        let Some(entry) = page.next() else { break };
        println!("  page: {}", entry?.key);
        cursor = Some(page.cursor()?);
    }

    // Counters that many threads can bump without losing an update.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let kv = kv.clone();
            std::thread::spawn(move || -> Result<(), KvError> {
                for _ in 0..25 {
                    kv.atomic().sum(&key!["visits"], 1).commit()?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread")?;
    }
    println!("visits = {}", shown(kv.get::<Value>(&key!["visits"])?.value));

    // A session that expires, and a watch that sees it go.
    let session = key!["sessions", "abc"];
    kv.set_with(
        &session,
        &Value::String("token".into()),
        SetOptions { expire_in: Some(Duration::from_millis(300)) },
    )?;
    let mut watch = kv.watch(std::slice::from_ref(&session))?;
    let now = watch.next().expect("first state")?;
    println!("session now: {}", shown(now[0].value.as_ref().map(KvValue::to_value).transpose()?));
    let later = watch.next_timeout(Duration::from_secs(5)).expect("expiry")?;
    println!("session after expiry: {}", shown(later[0].value.as_ref().map(KvValue::to_value).transpose()?));
    drop(watch);
    kv.close()?;

    // Everything acknowledged is there after a reopen.
    let kv = Kv::open(&dir, KvOptions::default())?;
    println!("after reopen: users/2 = {}", shown(kv.get::<Value>(&key!["users", 2])?.value));
    assert!(kv.get::<Value>(&key!["users", 3])?.value.is_none());
    kv.close()?;
    if dir == temporary {
        std::fs::remove_dir_all(&dir).ok();
    }
    Ok(())
}

/// A value as Deno's `console.log` prints it, or `(none)`.
fn shown(value: Option<Value>) -> String {
    value.map_or_else(|| "(none)".to_owned(), |v| v.to_string())
}
