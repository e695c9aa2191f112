//! Fault injection for tests (only with the `failpoints` feature): `FAILPOINTS` as the `fail`
//! crate reads it (`name=sleep(100)`, `name=panic`, …), and `BULKHEAD_KILL_AT=name[,name…]`,
//! which kills the process with SIGKILL the moment it reaches that point — a crash at an exact
//! instruction, as `kill -9` would leave it.

/// Reads both variables; call once at process start.
pub fn setup() {
    let scenario = fail::FailScenario::setup();
    std::mem::forget(scenario);
    if let Ok(names) = std::env::var("BULKHEAD_KILL_AT") {
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let point = name.to_owned();
            let result = fail::cfg_callback(name, move || {
                eprintln!("bulkhead: failpoint `{point}` reached: SIGKILL");
                let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::SIGKILL);
            });
            if let Err(e) = result {
                eprintln!("bulkhead: failpoint `{name}`: {e}");
            }
        }
    }
}
