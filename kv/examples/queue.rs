//! The persisted queue: enqueue work (now, later, and inside an atomic operation), handle
//! it on worker threads, retry a failing job, and collect what never succeeded.
//!
//! `cargo run -p stampkv --example queue`

use stampkv::{key, EnqueueOptions, Kv, KvError, KvOptions, ListenOptions, QueueMessage, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() -> Result<(), KvError> {
    let kv = Kv::open_in_memory(KvOptions::default())?;
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = handled.clone();
    let listener = kv.listen_queue(ListenOptions::default(), move |message: QueueMessage| {
        let job = message.value_as::<Value>().map_err(|e| e.to_string())?;
        let Value::String(name) = job else { return Err("not a job".to_string()) };
        if name == "flaky" {
            println!("  {name}: attempt {} fails", message.attempt);
            return Err(format!("{name} failed"));
        }
        println!("  {name}: done (attempt {})", message.attempt);
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })?;

    kv.enqueue(&Value::String("send welcome e-mail".into()), EnqueueOptions::default())?;
    kv.enqueue(
        &Value::String("send reminder".into()),
        EnqueueOptions { delay: Duration::from_millis(300), ..EnqueueOptions::default() },
    )?;
    // Enqueued only if the order is stored: both or neither.
    kv.atomic()
        .check(&key!["orders", 1], None)
        .set(&key!["orders", 1], &Value::String("1 kg of coffee".into()))
        .enqueue(&Value::String("ship order 1".into()), EnqueueOptions::default())
        .commit()?;
    // A job that always fails: retried twice, then written to the dead-letter key.
    kv.enqueue(
        &Value::String("flaky".into()),
        EnqueueOptions {
            keys_if_undelivered: vec![key!["failed_jobs", "flaky"]],
            backoff_schedule: Some(vec![Duration::from_millis(50), Duration::from_millis(100)]),
            ..EnqueueOptions::default()
        },
    )?;

    let deadline = Instant::now() + Duration::from_secs(10);
    while (handled.load(Ordering::SeqCst) < 3
        || kv.get::<Value>(&key!["failed_jobs", "flaky"])?.value.is_none())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("dead letter: {:?}", kv.get::<Value>(&key!["failed_jobs", "flaky"])?.value);
    assert_eq!(handled.load(Ordering::SeqCst), 3);
    listener.stop();
    kv.close()
}
