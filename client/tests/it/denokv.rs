//! The typed scenario against the reference server, `denokv` 0.14.0, when `STAMPKV_DENOKV`
//! names its binary (`denokv --sqlite-path <tmp>/db serve --access-token T --addr A`).
//! Without the variable the test says so and does nothing else.

use crate::common::{options, scenario, TOKEN};
use stampkv_client::RemoteKv;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the spawned server however the test ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_scenario_against_denokv() {
    let Some(binary) = std::env::var_os("STAMPKV_DENOKV") else {
        println!("STAMPKV_DENOKV is not set: the test against denokv was NOT run");
        eprintln!("STAMPKV_DENOKV is not set: the test against denokv was NOT run");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(&binary)
        .arg("--sqlite-path")
        .arg(dir.path().join("db"))
        .args(["serve", "--access-token", TOKEN, "--addr", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {binary:?}: {e}"));
    let _guard = KillOnDrop(child);
    let started = Instant::now();
    while tokio::net::TcpStream::connect(&addr).await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(15), "denokv did not listen on {addr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("http://{addr}");
    let kv = RemoteKv::connect(&url, options(TOKEN)).await.unwrap();
    assert_eq!(kv.protocol_version(), 3);
    assert_eq!(kv.endpoints(), (format!("{url}/v2"), None));
    scenario(&kv, false).await;
    assert_eq!(kv.stats().retries, 0);
}
