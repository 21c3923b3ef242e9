//! What the client tests share: a stampkv server on a loopback port, and the typed scenario
//! every KV Connect server must pass.

use futures_util::StreamExt;
use stampkv::{
    key, CommitResult, Consistency, Key, Kv, KvOptions, KvValue, ListOptions, Selector, SetOptions, Value,
};
use stampkv_client::{ConnectOptions, RemoteError, RemoteKv, Retry};
use stampkv_server::{serve, Config, Server};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

pub const TOKEN: &str = "client-test-token-0123";

/// A stampkv server running on a loopback port.
pub struct Running {
    pub url: String,
    pub server: Arc<Server>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Running {
    /// Stops the server and waits until its port is closed.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

/// Serves `kv` on `listener` with a new `Server` (a new database id).
pub async fn serve_on(listener: TcpListener, kv: Kv) -> Running {
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = Server::new(kv, Config::new(TOKEN)).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, server.clone(), async move {
        let _ = stopped.await;
    }));
    Running { url, server, stop: Some(stop), task: Some(task) }
}

/// A server over a fresh in-memory database.
pub async fn start_server() -> Running {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    serve_on(TcpListener::bind("127.0.0.1:0").await.unwrap(), kv).await
}

/// Options for tests: quick retries.
pub fn options(token: &str) -> ConnectOptions {
    ConnectOptions {
        retry: Retry { attempts: 4, base_delay: Duration::from_millis(20) },
        ..ConnectOptions::new(token)
    }
}

pub fn text(s: &str) -> Value {
    Value::from(s)
}

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(15), future)
        .await
        .unwrap_or_else(|_| panic!("{what}: timed out"))
}

/// Lists and returns the keys' last parts as strings or numbers, for compact assertions.
async fn list_keys(kv: &RemoteKv, selector: &Selector, options: &ListOptions) -> Vec<Key> {
    kv.list::<KvValue>(selector, options)
        .unwrap()
        .collect()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect()
}

fn user(i: i32) -> Key {
    key!["users", i]
}

/// The typed scenario: reads, lists, every mutation kind, checks, expiry, versionstamped
/// keys, type errors and watch, against an empty database. `prompt_expiry`: the server
/// hides an expired entry at once (stampkv does; denokv only after its sweep).
pub async fn scenario(kv: &RemoteKv, prompt_expiry: bool) {
    // get of a missing key
    let missing = kv.get::<Value>(&key!["nothing"]).await.unwrap();
    assert_eq!((missing.value, missing.versionstamp), (None, None));

    // set / get / get_many
    let mut stamps = Vec::new();
    for i in 0..25 {
        stamps.push(kv.set(&user(i), &Value::from(format!("user {i}").as_str())).await.unwrap());
    }
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "versionstamps increase: {stamps:?}");
    let entry = kv.get::<Value>(&user(3)).await.unwrap();
    assert_eq!(entry.value, Some(text("user 3")));
    assert_eq!(entry.versionstamp, Some(stamps[3]));
    let eventual = kv.get_with::<Value>(&user(4), Consistency::Eventual).await.unwrap();
    assert_eq!(eventual.value, Some(text("user 4")));
    let many = kv.get_many::<Value>(&[user(7), key!["nothing"], user(1)]).await.unwrap();
    let values: Vec<_> = many.iter().map(|e| e.value.clone()).collect();
    assert_eq!(values, vec![Some(text("user 7")), None, Some(text("user 1"))]);
    assert_eq!(many[1].key, key!["nothing"]);
    let too_many: Vec<Key> = (0..11).map(user).collect();
    let e = kv.get_many::<Value>(&too_many).await.unwrap_err();
    assert_eq!(e.to_string(), "Too many ranges (max 10)");

    // list: prefix, reverse, limit, range, cursor continuation across batches
    let prefix = Selector::prefix(key!["users"]);
    let all = list_keys(kv, &prefix, &ListOptions::default()).await;
    assert_eq!(all, (0..25).map(user).collect::<Vec<_>>());
    let reversed = list_keys(kv, &prefix, &ListOptions { reverse: true, ..ListOptions::default() }).await;
    assert_eq!(reversed, (0..25).rev().map(user).collect::<Vec<_>>());
    let limited = list_keys(kv, &prefix, &ListOptions { limit: Some(5), ..ListOptions::default() }).await;
    assert_eq!(limited, (0..5).map(user).collect::<Vec<_>>());
    let range = list_keys(kv, &Selector::range(user(5), user(9)), &ListOptions::default()).await;
    assert_eq!(range, (5..9).map(user).collect::<Vec<_>>());
    let in_prefix = Selector::prefix(key!["users"]).with_start(user(20));
    assert_eq!(
        list_keys(kv, &in_prefix, &ListOptions::default()).await,
        (20..25).map(user).collect::<Vec<_>>()
    );

    let before = kv.stats().snapshot_reads;
    let first = ListOptions { limit: Some(10), batch_size: Some(4), ..ListOptions::default() };
    let mut list = kv.list::<Value>(&prefix, &first).unwrap();
    assert_eq!(list.cursor().unwrap_err().to_string(), "Cannot get cursor before first iteration");
    let mut seen = Vec::new();
    while let Some(entry) = list.next().await {
        seen.push(entry.unwrap().key);
    }
    assert_eq!(seen, (0..10).map(user).collect::<Vec<_>>());
    assert_eq!(kv.stats().snapshot_reads - before, 3, "batches of 4 for 10 entries");
    let cursor = list.cursor().unwrap();
    assert!(!cursor.is_empty());
    let rest_options =
        ListOptions { cursor: Some(cursor.clone()), batch_size: Some(7), ..ListOptions::default() };
    let mut rest = kv.list::<Value>(&prefix, &rest_options).unwrap();
    let mut tail = Vec::new();
    while let Some(entry) = rest.next().await {
        tail.push(entry.unwrap().key);
    }
    assert_eq!(tail, (10..25).map(user).collect::<Vec<_>>());
    assert_eq!(rest.cursor().unwrap(), "", "exhausted");
    let back = ListOptions { cursor: Some(cursor), reverse: true, limit: Some(3), ..ListOptions::default() };
    assert_eq!(list_keys(kv, &prefix, &back).await, vec![user(8), user(7), user(6)]);
    let e = kv
        .list::<Value>(&prefix, &ListOptions { batch_size: Some(1001), ..ListOptions::default() })
        .unwrap_err();
    assert_eq!(e.to_string(), "Too many entries (max 1000)");
    let streamed: Vec<_> = kv
        .list::<Value>(&Selector::range(user(0), user(3)), &ListOptions::default())
        .unwrap()
        .into_stream()
        .collect()
        .await;
    assert_eq!(streamed.len(), 3);

    // atomic: checks that hold and that fail
    let current = kv.get::<Value>(&user(0)).await.unwrap();
    let ok = kv.atomic().check_entry(&current).set(&user(0), &text("changed")).commit().await.unwrap();
    let CommitResult::Committed(changed_at) = ok else { panic!("check should hold") };
    let stale = kv.atomic().check_entry(&current).set(&user(0), &text("lost")).commit().await.unwrap();
    assert_eq!(stale, CommitResult::CheckFailed);
    let exists = kv.atomic().check(&user(1), None).delete(&user(1)).commit().await.unwrap();
    assert_eq!(exists, CommitResult::CheckFailed);
    let after = kv.get::<Value>(&user(0)).await.unwrap();
    assert_eq!((after.value, after.versionstamp), (Some(text("changed")), Some(changed_at)));
    assert!(kv.get::<Value>(&user(1)).await.unwrap().exists(), "a failed check applies nothing");

    // set then delete in one write; delete of a missing key
    let r = kv.atomic().set(&key!["tmp"], &text("x")).delete(&key!["tmp"]).commit().await.unwrap();
    assert!(r.ok());
    assert!(!kv.get::<Value>(&key!["tmp"]).await.unwrap().exists());
    kv.delete(&key!["never"]).await.unwrap();
    kv.delete(&user(24)).await.unwrap();
    assert!(!kv.get::<Value>(&user(24)).await.unwrap().exists());

    // sum / min / max
    kv.atomic().sum(&key!["n"], 5).sum(&key!["n"], 10).commit().await.unwrap();
    assert_eq!(kv.get::<KvValue>(&key!["n"]).await.unwrap().value, Some(KvValue::U64(15)));
    kv.atomic().sum(&key!["n"], u64::MAX).commit().await.unwrap();
    assert_eq!(kv.get::<KvValue>(&key!["n"]).await.unwrap().value, Some(KvValue::U64(14)), "wraps");
    kv.atomic().min(&key!["n"], 3).max(&key!["hi"], 9).commit().await.unwrap();
    kv.atomic().max(&key!["hi"], 4).min(&key!["lo"], 2).commit().await.unwrap();
    let got = kv.get_many::<KvValue>(&[key!["n"], key!["hi"], key!["lo"]]).await.unwrap();
    let got: Vec<_> = got.into_iter().map(|e| e.value).collect();
    assert_eq!(got, vec![Some(KvValue::U64(3)), Some(KvValue::U64(9)), Some(KvValue::U64(2))]);
    for (op, expected) in [("sum", "'sum'"), ("min", "'min'"), ("max", "'max'")] {
        let atomic = kv.atomic();
        let atomic = match op {
            "sum" => atomic.sum(&user(2), 1),
            "min" => atomic.min(&user(2), 1),
            _ => atomic.max(&user(2), 1),
        };
        match atomic.commit().await {
            Err(RemoteError::Http { status: 400, body }) => {
                let wanted =
                    format!("Failed to perform {expected} mutation on a non-U64 value in the database");
                assert!(body.contains(&wanted), "{op}: {body}");
            }
            other => panic!("{op} on a string: {other:?}"),
        }
    }
    assert_eq!(kv.get::<Value>(&user(2)).await.unwrap().value, Some(text("user 2")), "nothing applied");

    // expire_in
    let options = SetOptions { expire_in: Some(Duration::from_secs(3600)) };
    kv.set_with(&key!["later"], &text("soon gone"), options).await.unwrap();
    assert!(kv.get::<Value>(&key!["later"]).await.unwrap().exists());
    if prompt_expiry {
        let options = SetOptions { expire_in: Some(Duration::from_millis(50)) };
        kv.set_with(&key!["brief"], &text("x"), options).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!kv.get::<Value>(&key!["brief"]).await.unwrap().exists(), "expired");
    }
    let e = kv
        .atomic()
        .set_with(&key!["x"], &text("x"), SetOptions { expire_in: Some(Duration::from_micros(1500)) })
        .commit()
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "expireIn must be a non-negative integer: received 1.5");

    // versionstamped keys
    let r = kv.atomic().set_versionstamped_key(&key!["vk"], &text("first")).commit().await.unwrap();
    let stamp = r.versionstamp().unwrap();
    let vk = kv
        .list::<Value>(&Selector::prefix(key!["vk"]), &ListOptions::default())
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(vk.len(), 1);
    assert_eq!(vk[0].key, key!["vk", stamp.to_hex().as_str()]);
    assert_eq!(vk[0].versionstamp, stamp);
    assert_eq!(vk[0].value, text("first"));

    // local validation, Deno's texts
    let e = kv.set(&key![], &text("x")).await.unwrap_err();
    assert_eq!(e.to_string(), "key cannot be empty");
    let e = kv.set(&key!["big"], &KvValue::Bytes(vec![1; 65537])).await.unwrap_err();
    assert_eq!(e.to_string(), "Value too large (max 65536 bytes)");

    // watch: initial state, change, delete
    let mut watch = within("watch", kv.watch(&[key!["w1"], key!["w2"]])).await.unwrap();
    let initial = within("initial", watch.next()).await.unwrap().unwrap();
    assert_eq!(initial.iter().map(|e| e.value.clone()).collect::<Vec<_>>(), vec![None, None]);
    assert_eq!(initial[0].key, key!["w1"]);
    let set_at = kv.set(&key!["w1"], &text("one")).await.unwrap();
    let changed = within("change", watch.next()).await.unwrap().unwrap();
    assert_eq!(changed[0].value, Some(KvValue::from_value(&text("one")).unwrap()));
    assert_eq!(changed[0].versionstamp, Some(set_at));
    assert_eq!(changed[1].value, None);
    kv.set(&key!["unrelated"], &text("x")).await.unwrap();
    kv.delete(&key!["w1"]).await.unwrap();
    let deleted = within("delete", watch.next()).await.unwrap().unwrap();
    assert_eq!((deleted[0].value.clone(), deleted[0].versionstamp), (None, None));
    let e = kv.watch(&(0..11).map(user).collect::<Vec<_>>()).await.unwrap_err();
    assert_eq!(e.to_string(), "Too many keys (max 10)");
}
