//! An egress endpoint, `host:port`: parsed and validated once (by `bulkhead check`), then
//! carried typed to every emitter and to `bulkhead up`.

use std::fmt;
use std::net::Ipv4Addr;

use crate::ranges::Class;

/// One `host:port` an instance may reach: a DNS name or a routable IPv4 address and a port.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    /// DNS name or IPv4 address, as written.
    pub host: String,
    /// Port, 1 to 65535.
    pub port: u16,
}

/// Why a `host:port` entry is not an egress endpoint (the text is the diagnostic's label).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPortError(pub &'static str);

impl fmt::Display for HostPortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for HostPortError {}

impl HostPort {
    /// Parses and checks an entry. The host is a DNS name or IPv4 address; an address in a
    /// range that is never a destination ([`crate::ranges`], class `Never`) is refused, one in an
    /// internal range passes (the proxy refuses it unless the deployment opens the range).
    pub fn parse(entry: &str) -> Result<HostPort, HostPortError> {
        let (host, port) = entry
            .rsplit_once(':')
            .ok_or(HostPortError("missing `:port`"))?;
        let port: u32 = port
            .parse()
            .map_err(|_| HostPortError("the port is not a number"))?;
        let port = u16::try_from(port)
            .ok()
            .filter(|p| *p >= 1)
            .ok_or(HostPortError("the port must be from 1 to 65535"))?;
        let ok = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
            });
        if !ok {
            return Err(HostPortError("the host is not a DNS name or IPv4 address"));
        }
        match host
            .parse::<Ipv4Addr>()
            .ok()
            .and_then(|ip| crate::ranges::special(ip.into()))
        {
            Some(r) if r.class == Class::Never => Err(HostPortError(
                "loopback, unspecified, link-local (cloud metadata), documentation, multicast and reserved addresses are never egress",
            )),
            _ => Ok(HostPort {
                host: host.to_string(),
                port,
            }),
        }
    }

    /// `host:port`, the `:authority` of a CONNECT request.
    pub fn authority(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::HostPort;

    #[test]
    fn accepts_names_and_routable_addresses() {
        for ok in ["db.internal:5432", "hooks.example.com:443", "10.1.2.3:80"] {
            let hp = HostPort::parse(ok).expect(ok);
            assert_eq!(hp.to_string(), ok);
        }
    }

    #[test]
    fn refuses_metadata_loopback_and_malformed() {
        for bad in [
            "169.254.169.254:80",
            "169.254.1.1:443",
            "127.0.0.1:8000",
            "0.0.0.0:80",
            "224.0.0.1:5353",
            "255.255.255.255:9",
            "192.0.2.1:443",
            "240.1.2.3:80",
            "host",
            "host:0",
            "host:70000",
            "-bad.example:80",
        ] {
            assert!(HostPort::parse(bad).is_err(), "{bad}");
        }
    }
}
