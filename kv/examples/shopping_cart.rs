//! Shopping-cart statistics with `sum`, `min` and `max` (seed 003): each item is stored
//! and folded into the cart's total, cheapest and dearest price in one atomic commit.
//!
//! `cargo run -p stampkv --features serde --example shopping_cart`

use serde::{Deserialize, Serialize};
use stampkv::{key, Kv, KvError, KvOptions, KvValue};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CartItem {
    user_id: String,
    item_desc: String,
    price: u64,
}

fn stat(kv: &Kv, name: &str) -> Result<u64, KvError> {
    match kv.get::<KvValue>(&key![name])?.value {
        Some(KvValue::U64(n)) => Ok(n),
        _ => Ok(0),
    }
}

fn main() -> Result<(), KvError> {
    let kv = Kv::open_in_memory(KvOptions::default())?;
    let cart = [
        ("Arduino Uno kit", 60),
        ("Temp sensor", 10),
        ("Humidity sensor", 15),
        ("Power cord with 5V regulator", 18),
        ("Servo", 8),
    ];
    for (i, (desc, price)) in cart.into_iter().enumerate() {
        let item = CartItem { user_id: "100".into(), item_desc: desc.into(), price };
        kv.atomic()
            .set(&key!["cart", "100", i as i32], &item)
            .min(&key!["cart_min"], price)
            .max(&key!["cart_max"], price)
            .sum(&key!["cart_sum"], price)
            .commit()?;
    }
    println!("Shopping cart data");
    println!("Min price: {}", stat(&kv, "cart_min")?);
    println!("Max price: {}", stat(&kv, "cart_max")?);
    println!("Total price: {}", stat(&kv, "cart_sum")?);
    assert_eq!((stat(&kv, "cart_min")?, stat(&kv, "cart_max")?, stat(&kv, "cart_sum")?), (8, 60, 111));

    // mutate() with a KvU64: a hit counter.
    for _ in 0..3 {
        kv.atomic()
            .mutate(stampkv::Mutation {
                key: key!["hit_counter"],
                kind: stampkv::MutationKind::Sum(KvValue::U64(1)),
                expire_in: None,
            })
            .commit()?;
    }
    println!("hits: {}", stat(&kv, "hit_counter")?);
    Ok(())
}
