//! The address plan of `bulkhead up` (a deployment on this machine): where each instance and
//! egress proxy listens. One home for both the runtime that binds them and the desktop client
//! files that reach them.

use bulkhead_vocab::NetworkMode;
use std::net::{Ipv4Addr, SocketAddrV4};

/// The second octet `bulkhead up` uses unless told otherwise (`10.250.…`).
pub const DEFAULT_SUBNET: u8 = 250;

/// The host's address on the egress bridge (proxied instances and their proxies meet there).
pub fn bridge_host(subnet: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, subnet, 0, 1)
}

/// Where the egress proxy of the `index`-th server listens (on the host, bridge side).
pub fn proxy_addr(subnet: u8, index: u8) -> SocketAddrV4 {
    SocketAddrV4::new(bridge_host(subnet), 3128 + u16::from(index))
}

/// Host and namespace ends of the point-to-point link of the `index`-th server's `none`
/// instance.
pub fn isolated_link(subnet: u8, index: u8) -> (Ipv4Addr, Ipv4Addr) {
    (
        Ipv4Addr::new(10, subnet, 10 + index, 1),
        Ipv4Addr::new(10, subnet, 10 + index, 2),
    )
}

/// Where the `index`-th server's instance in `mode` serves: `full` on loopback, `proxied` on
/// the egress bridge, `none` on its own link.
pub fn instance_addr(subnet: u8, index: u8, mode: NetworkMode, port: u16) -> SocketAddrV4 {
    let ip = match mode {
        NetworkMode::Full => Ipv4Addr::LOCALHOST,
        NetworkMode::Proxied => Ipv4Addr::new(10, subnet, 0, 10 + index),
        NetworkMode::None => isolated_link(subnet, index).1,
    };
    SocketAddrV4::new(ip, port)
}
