//! A non-unique secondary index (seed 001): users by favourite colour, listed by prefix.
//!
//! `cargo run -p stampkv --features serde --example non_unique_index`

use serde::{Deserialize, Serialize};
use stampkv::{key, Kv, KvError, KvOptions, ListOptions, Selector};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct User {
    id: String,
    name: String,
    favorite_color: String,
}

fn insert_user(kv: &Kv, user: &User) -> Result<bool, KvError> {
    let primary = key!["users", &user.id];
    let by_color = key!["users_by_favorite_color", &user.favorite_color, &user.id];
    let result = kv.atomic().check(&primary, None).set(&primary, user).set(&by_color, user).commit()?;
    Ok(result.ok())
}

fn users_by_favorite_color(kv: &Kv, color: &str) -> Result<Vec<User>, KvError> {
    let selector = Selector::prefix(key!["users_by_favorite_color", color]);
    kv.list::<User>(&selector, &ListOptions::default())?.map(|entry| Ok(entry?.value)).collect()
}

fn main() -> Result<(), KvError> {
    let kv = Kv::open_in_memory(KvOptions::default())?;
    let users = [("1", "Alice", "blue"), ("2", "Bob", "green"), ("3", "Carol", "blue"), ("4", "Dave", "red")];
    for (id, name, color) in users {
        let user = User { id: id.into(), name: name.into(), favorite_color: color.into() };
        assert!(insert_user(&kv, &user)?);
    }
    for color in ["blue", "green", "purple"] {
        let names: Vec<String> = users_by_favorite_color(&kv, color)?.into_iter().map(|u| u.name).collect();
        println!("{color}: {names:?}");
    }
    assert_eq!(users_by_favorite_color(&kv, "blue")?.len(), 2);
    Ok(())
}
