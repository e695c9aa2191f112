//! Where a server's state lives: a SQLite database in the state directory, or a PostgreSQL
//! database shared by every replica.

use super::postgres::PgOptions;
use std::path::{Path, PathBuf};

/// A server's store location.
#[derive(Clone, Debug)]
pub enum StoreLocation {
    /// `<state dir>/compliance-<server>.db` and its `.lock` file.
    Sqlite {
        /// The database file (absolute).
        db: PathBuf,
    },
    /// A PostgreSQL database.
    Postgres(PgOptions),
}

impl StoreLocation {
    /// The SQLite location of `server`'s own store in `state_dir` (before trust domains, every
    /// server kept one: `bulkhead state migrate` folds them into their domain's store).
    pub fn sqlite(state_dir: &Path, server: &str) -> StoreLocation {
        StoreLocation::Sqlite {
            db: per_server_db(state_dir, server),
        }
    }

    /// The SQLite store of trust domain `domain` in `state_dir`, shared by all its servers.
    pub fn sqlite_domain(state_dir: &Path, domain: &str) -> StoreLocation {
        StoreLocation::Sqlite {
            db: state_dir.join(format!("sessions-{domain}.db")),
        }
    }

    /// How the location is named in messages and the marker: a path, or the PostgreSQL URL without
    /// its password.
    pub fn describe(&self) -> String {
        match self {
            StoreLocation::Sqlite { db } => db.display().to_string(),
            StoreLocation::Postgres(pg) => redact_password(&pg.url),
        }
    }
}

/// The database file of `server`'s own store in `state_dir` (see [`StoreLocation::sqlite`]).
pub fn per_server_db(state_dir: &Path, server: &str) -> PathBuf {
    state_dir.join(format!("compliance-{server}.db"))
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some(parts) => parts,
        None => return url.to_owned(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            redact_password("postgres://app:s3cr@t@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(redact_password("postgres://db/x"), "postgres://db/x");
    }
}
