//! Record version history: every update of a document is also stored under a key that ends
//! with the commit's versionstamp, so the history lists in commit order.
//!
//! `cargo run -p stampkv --features serde --example version_history`

use serde::{Deserialize, Serialize};
use stampkv::{key, Kv, KvError, KvOptions, ListOptions, Selector};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Document {
    title: String,
    body: String,
}

/// Saves the current version and appends it to the history, atomically.
fn save(kv: &Kv, id: &str, doc: &Document) -> Result<String, KvError> {
    let result = kv
        .atomic()
        .set(&key!["docs", id], doc)
        .set_versionstamped_key(&key!["doc_history", id], doc)
        .commit()?;
    Ok(result.versionstamp().map(|v| v.to_string()).unwrap_or_default())
}

fn main() -> Result<(), KvError> {
    let kv = Kv::open_in_memory(KvOptions::default())?;
    let mut doc = Document { title: "Draft".into(), body: "Hello".into() };
    for edit in ["Hello, world", "Hello, world!", "Goodbye"] {
        save(&kv, "readme", &doc)?;
        doc.body = edit.into();
    }
    save(&kv, "readme", &doc)?;

    println!("history of readme:");
    let history =
        kv.list::<Document>(&Selector::prefix(key!["doc_history", "readme"]), &ListOptions::default())?;
    let mut bodies = Vec::new();
    for entry in history {
        let entry = entry?;
        println!("  {} {:?}", entry.versionstamp, entry.value.body);
        bodies.push(entry.value.body);
    }
    assert_eq!(bodies, ["Hello", "Hello, world", "Hello, world!", "Goodbye"]);
    let current = kv.get::<Document>(&key!["docs", "readme"])?;
    println!("current: {:?}", current.value);
    Ok(())
}
