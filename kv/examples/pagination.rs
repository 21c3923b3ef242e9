//! Pagination with cursors: pages of 4, forward and backward, each resuming where the
//! previous page stopped.
//!
//! `cargo run -p stampkv --features serde --example pagination`

use stampkv::{key, Kv, KvError, KvOptions, ListOptions, Selector, Value};

fn page(kv: &Kv, cursor: Option<String>, reverse: bool) -> Result<(Vec<String>, String), KvError> {
    let options = ListOptions { limit: Some(4), cursor, reverse, ..ListOptions::default() };
    let mut iter = kv.list::<Value>(&Selector::prefix(key!["posts"]), &options)?;
    let mut titles = Vec::new();
    for entry in iter.by_ref() {
        if let Value::String(title) = entry?.value {
            titles.push(title);
        }
    }
    // The cursor of the last entry; "" once the listing is exhausted.
    let cursor = if titles.is_empty() { String::new() } else { iter.cursor()? };
    Ok((titles, cursor))
}

fn main() -> Result<(), KvError> {
    let kv = Kv::open_in_memory(KvOptions::default())?;
    let mut op = kv.atomic();
    for day in 1..=10 {
        op =
            op.set(&key!["posts", format!("2024-05-{day:02}")], &Value::String(format!("Post of May {day}")));
    }
    op.commit()?;

    for reverse in [false, true] {
        println!("{}:", if reverse { "newest first" } else { "oldest first" });
        let mut cursor = None;
        let mut count = 0;
        loop {
            let (titles, next) = page(&kv, cursor.take(), reverse)?;
            if titles.is_empty() {
                break;
            }
            count += titles.len();
            println!("  page: {titles:?} (cursor {next:?})");
            if next.is_empty() {
                break;
            }
            cursor = Some(next);
        }
        assert_eq!(count, 10);
    }
    Ok(())
}
