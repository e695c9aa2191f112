//! Sample data for the example connectors, so `up` and `demo` run on embedded defaults: a small
//! records database, an application log and a security log, created in a folder of the run's own.

use std::path::Path;

const OWNERS: [&str; 5] = ["ana", "ben", "chen", "dia", "eli"];
const WORDS: [&str; 8] = [
    "Acme renewal",
    "Globex audit",
    "Initech onboarding",
    "Umbrella dispute",
    "Hooli expansion",
    "Vandelay import",
    "Stark refit",
    "Wayne grant",
];

/// Creates `dir/records.db` and `dir/logs/app.log` unless the variables already point elsewhere;
/// returns the environment the instances need (`RECORDS_DB`, `APP_LOG_DIR`, `SECURITY_LOG_DIR`).
pub fn seed(dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut env = Vec::new();
    if std::env::var_os("RECORDS_DB").is_none() {
        let db = dir.join("records.db");
        if !db.exists() {
            std::fs::create_dir_all(dir)?;
            let conn = rusqlite::Connection::open(&db)?;
            conn.execute_batch("CREATE TABLE records (id INTEGER PRIMARY KEY, title TEXT NOT NULL, owner TEXT NOT NULL);")?;
            let mut stmt = conn.prepare("INSERT INTO records (title, owner) VALUES (?1, ?2)")?;
            for i in 0..60 {
                stmt.execute((
                    format!("{} #{}", WORDS[i % WORDS.len()], 100 + i),
                    OWNERS[i % OWNERS.len()],
                ))?;
            }
        }
        env.push(("RECORDS_DB".into(), db.display().to_string()));
    }
    if std::env::var_os("APP_LOG_DIR").is_none() {
        let logs = dir.join("logs");
        if !logs.exists() {
            std::fs::create_dir_all(&logs)?;
            let mut text = String::new();
            for i in 0..400 {
                let level = if i % 37 == 0 {
                    "ERROR"
                } else if i % 11 == 0 {
                    "WARN"
                } else {
                    "INFO"
                };
                text.push_str(&format!(
                    "2026-11-22T{:02}:{:02}:{:02}Z {level} request {i} handled in {} ms\n",
                    8 + i / 60,
                    i % 60,
                    (i * 7) % 60,
                    3 + i % 40
                ));
            }
            std::fs::write(logs.join("app.log"), text)?;
        }
        env.push(("APP_LOG_DIR".into(), logs.display().to_string()));
    }
    if std::env::var_os("SECURITY_LOG_DIR").is_none() {
        let logs = dir.join("security-logs");
        if !logs.exists() {
            std::fs::create_dir_all(&logs)?;
            let mut text = String::new();
            for i in 0..120 {
                let line = if i % 9 == 0 {
                    format!(
                        "WARN login failed for {} from 10.20.{}.{}",
                        OWNERS[i % 5],
                        i % 7,
                        i % 200
                    )
                } else {
                    format!("INFO login ok for {}", OWNERS[i % 5])
                };
                text.push_str(&format!(
                    "2026-11-22T{:02}:{:02}:00Z {line}\n",
                    9 + i / 60,
                    i % 60
                ));
            }
            std::fs::write(logs.join("auth.log"), text)?;
        }
        env.push(("SECURITY_LOG_DIR".into(), logs.display().to_string()));
    }
    Ok(env)
}
