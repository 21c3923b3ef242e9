//! The typed client against stampkv's own server over loopback: the shared scenario, a
//! restarted server (new database id), and stats.

use crate::common::{options, scenario, serve_on, start_server, text, TOKEN};
use stampkv::{key, Kv, KvOptions, Value};
use stampkv_client::{RemoteError, RemoteKv};
use tokio::net::TcpListener;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_scenario_against_stampkv_server() {
    let running = start_server().await;
    let kv = RemoteKv::connect(&running.url, options(TOKEN)).await.unwrap();
    assert_eq!(kv.protocol_version(), 3);
    assert_eq!(kv.endpoints(), (format!("{}/v2", running.url), None));
    scenario(&kv, true).await;
    let stats = kv.stats();
    assert_eq!(stats.metadata_exchanges, 1);
    assert_eq!(stats.retries, 0);
    assert_eq!(stats.watches, 1);
    assert_eq!(stats.eventual_requests, 0, "no eventual endpoint listed");
    assert!(stats.snapshot_reads > 20 && stats.atomic_writes > 30, "{stats:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_a_metadata_error() {
    let running = start_server().await;
    let e = RemoteKv::connect(&running.url, options("wrong-token-0123456")).await.unwrap_err();
    assert!(matches!(e, RemoteError::Metadata(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("status 401") && text.contains("Invalid access token."), "{text}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_when_the_server_restarts_with_a_new_database_id() {
    let kv_store = Kv::open_in_memory(KvOptions::default()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let first = serve_on(listener, kv_store.clone()).await;
    let first_id = first.server.database_id().to_owned();
    let kv = RemoteKv::connect(&first.url, options(TOKEN)).await.unwrap();
    kv.set(&key!["a"], &text("before")).await.unwrap();
    first.stop().await;

    let second = serve_on(TcpListener::bind(addr).await.unwrap(), kv_store).await;
    assert_ne!(second.server.database_id(), first_id);
    let before = kv.stats();
    assert_eq!(kv.get::<Value>(&key!["a"]).await.unwrap().value, Some(text("before")));
    kv.set(&key!["b"], &text("after")).await.unwrap();
    let after = kv.stats();
    assert_eq!(after.metadata_exchanges - before.metadata_exchanges, 1, "{after:?}");
    assert_eq!(second.server.kv().get::<Value>(&key!["b"]).unwrap().value, Some(text("after")));
    second.stop().await;
}
