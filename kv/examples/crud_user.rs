//! Create, read, update and delete a user, with typed Rust data (serde).
//!
//! `cargo run -p stampkv --features serde --example crud_user`

use serde::{Deserialize, Serialize};
use stampkv::{key, Kv, KvError, KvOptions};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct User {
    id: String,
    name: String,
    role: String,
}

fn main() -> Result<(), KvError> {
    let dir = std::env::temp_dir().join(format!("stampkv-crud-{}", std::process::id()));
    let kv = Kv::open(&dir, KvOptions::default())?;

    let user = User { id: "a12345".into(), name: "Craig".into(), role: "admin".into() };
    let created = kv.set(&key!["user", &user.id], &user)?;
    println!("created {} at versionstamp {created}", user.id);

    let read = kv.get::<User>(&key!["user", "a12345"])?;
    println!("read: {:?} (versionstamp {:?})", read.value, read.versionstamp.map(|v| v.to_string()));
    assert_eq!(read.value.as_ref(), Some(&user));

    // Update only if nobody changed the user since we read it.
    let updated = User { role: "editor".into(), ..user.clone() };
    let result = kv.atomic().check_entry(&read).set(&key!["user", "a12345"], &updated).commit()?;
    println!("update committed: {}", result.ok());
    assert!(result.ok());
    // The same check again fails: the versionstamp moved on.
    let stale = kv.atomic().check_entry(&read).set(&key!["user", "a12345"], &user).commit()?;
    println!("stale update committed: {}", stale.ok());
    assert!(!stale.ok());

    kv.delete(&key!["user", "a12345"])?;
    let gone = kv.get::<User>(&key!["user", "a12345"])?;
    println!("after delete: {:?}", gone.value);
    assert!(gone.value.is_none());

    kv.close()?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
