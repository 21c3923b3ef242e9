//! A unique secondary index (seed 001): users by e-mail. Inserting a user whose id or
//! e-mail is taken fails cleanly; deleting uses a check-and-retry loop so that it never
//! removes a stale index entry.
//!
//! `cargo run -p stampkv --features serde --example unique_index`

use serde::{Deserialize, Serialize};
use stampkv::{key, Kv, KvError, KvOptions};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct User {
    id: String,
    name: String,
    email: String,
}

/// Stores the user under its id and its e-mail, if neither is taken.
fn insert_user(kv: &Kv, user: &User) -> Result<bool, KvError> {
    let primary = key!["users", &user.id];
    let by_email = key!["users_by_email", &user.email];
    let result = kv
        .atomic()
        .check(&primary, None)
        .check(&by_email, None)
        .set(&primary, user)
        .set(&by_email, user)
        .commit()?;
    Ok(result.ok())
}

fn get_user(kv: &Kv, id: &str) -> Result<Option<User>, KvError> {
    Ok(kv.get::<User>(&key!["users", id])?.value)
}

fn get_user_by_email(kv: &Kv, email: &str) -> Result<Option<User>, KvError> {
    Ok(kv.get::<User>(&key!["users_by_email", email])?.value)
}

/// Deletes both keys; retries if the user changed between the read and the delete.
fn delete_user(kv: &Kv, id: &str) -> Result<(), KvError> {
    loop {
        let entry = kv.get::<User>(&key!["users", id])?;
        let Some(user) = &entry.value else { return Ok(()) };
        let result = kv
            .atomic()
            .check_entry(&entry)
            .delete(&key!["users", id])
            .delete(&key!["users_by_email", &user.email])
            .commit()?;
        if result.ok() {
            return Ok(());
        }
    }
}

fn main() -> Result<(), KvError> {
    let kv = Kv::open_in_memory(KvOptions::default())?;
    let alice = User { id: "1".into(), name: "Alice".into(), email: "alice@example.com".into() };
    let bob = User { id: "2".into(), name: "Bob".into(), email: "bob@example.com".into() };
    assert!(insert_user(&kv, &alice)?);
    assert!(insert_user(&kv, &bob)?);
    let impostor = User { id: "3".into(), name: "Mallory".into(), email: "alice@example.com".into() };
    let inserted = insert_user(&kv, &impostor)?;
    println!("insert with a taken e-mail: {}", if inserted { "accepted" } else { "refused" });
    assert!(!inserted);
    assert!(get_user(&kv, "3")?.is_none(), "nothing of the refused insert was written");

    println!("by id 1: {:?}", get_user(&kv, "1")?);
    println!("by e-mail bob@example.com: {:?}", get_user_by_email(&kv, "bob@example.com")?);
    delete_user(&kv, "1")?;
    println!("after deleting 1, alice@example.com -> {:?}", get_user_by_email(&kv, "alice@example.com")?);
    assert!(get_user_by_email(&kv, "alice@example.com")?.is_none());
    // The e-mail is free again.
    assert!(insert_user(&kv, &impostor)?);
    println!(
        "Mallory now owns alice@example.com: {:?}",
        get_user_by_email(&kv, "alice@example.com")?.map(|u| u.name)
    );
    Ok(())
}
