use stampkv_benches::*;
use std::time::Instant;
fn main() {
    let n: u64 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(1_000_000);
    let random = std::env::args().nth(2).is_some();
    let dir = tempfile::tempdir().unwrap();
    let e = StampkvEngine::open(dir.path());
    let pool = value_pool(1);
    let order: Vec<u64> = if random { shuffled(n, 1) } else { (0..n).collect() };
    let t = Instant::now();
    fill(&e, &order, &pool);
    println!("fill {:.0}/s  {}", n as f64 / t.elapsed().as_secs_f64(), e.report());
}
