//! Starts an etcd cluster on free loopback ports for the end-to-end scripts, prints its
//! client URLs as one line (`endpoints=http://127.0.0.1:P1,...`), and keeps it running until
//! its standard input closes or it is killed (the members die with it, also on SIGKILL).
//!
//!   etcd_cluster [MEMBERS]   (default 3)

use stampkv_testkit::etcd::EtcdCluster;
use std::io::{Read, Write};

fn main() {
    let size = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 3,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: etcd_cluster [MEMBERS]");
            std::process::exit(2);
        }
    };
    let cluster = match EtcdCluster::start(size) {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("etcd_cluster: {e}");
            std::process::exit(1);
        }
    };
    let mut out = std::io::stdout();
    let _ = writeln!(out, "endpoints={}", cluster.endpoints_arg());
    let _ = out.flush();
    // Runs until stdin closes (the script ends) or the process is killed.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(cluster);
}
