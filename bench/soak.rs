//! The soak run at full size (`scripts/bench --soak`): see tests/support/soak.rs.
//!
//! Usage: `soak <path to a release bulkhead binary> [folder to keep the run in]`; prints the
//! report as `key\tvalue` lines.

#[path = "../tests/support/soak.rs"]
mod soak;

fn main() -> anyhow::Result<()> {
    let exe = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: soak <bulkhead binary>"))?;
    let tmp = tempfile::tempdir()?;
    // A second argument keeps the run's files (server log, state) there for a look afterwards.
    let dir = std::env::args()
        .nth(2)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let r = rt.block_on(soak::run(
        std::path::Path::new(&exe),
        &dir,
        &soak::SoakSize::full(),
    ));
    println!(
        "good_calls\t{}\ngood_errors\t{}\ngood_p50_ms\t{:.1}\ngood_p99_ms\t{:.1}\ngood_max_ms\t{:.1}",
        r.good_calls, r.good_errors, r.good_p50_ms, r.good_p99_ms, r.good_max_ms
    );
    println!(
        "sessions_created\t{}\nsessions_refused\t{}\nflood_sessions_alive\t{}\nslow_connections_opened\t{}",
        r.sessions_created, r.sessions_refused, r.flood_sessions_alive, r.slow_connections_opened
    );
    println!(
        "writes_ok\t{}\nwrites_refused\t{}\nsearches\t{}\npeak_rss_mib\t{:.1}\nserver_alive\t{}",
        r.writes_ok, r.writes_refused, r.searches, r.peak_rss_mib, r.server_alive
    );
    if let Some(e) = r.first_error {
        println!("first_error\t{e}");
    }
    Ok(())
}
